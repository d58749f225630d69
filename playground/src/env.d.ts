/** The version of the `ai` package in this build (vite.config.js). */
declare const __AI_VERSION__: string;
