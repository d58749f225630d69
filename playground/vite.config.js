// Vite 7 without @vitejs/plugin-react: esbuild compiles the JSX (automatic runtime).
// `vite` / `vite preview` proxy /stream, /live and /chats to the server (ADK_STREAM_URL,
// default http://127.0.0.1:8000), so the page calls the API on its own origin,
// as it does when the FastAPI server serves dist/ at /.
//
// Two builds of the same page: `vite build` on ai 7 (what `npm i ai @ai-sdk/react` installs
// today) into dist/, and `vite build --mode v6` on ai 6 into dist-v6/, where `ai` and
// `@ai-sdk/react` are the npm aliases `ai-6` and `@ai-sdk/react-3` of package.json, and
// `./ai7-only` (ai 7's own WebSocketChatTransport) is `./ai7-only.ai6` (none).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const target = process.env.ADK_STREAM_URL ?? 'http://127.0.0.1:8000';
const proxy = {
  '/stream': { target, changeOrigin: true },
  '/live': { target, ws: true, changeOrigin: true },
  '/chats': { target, changeOrigin: true },
};

const here = path => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig(({ mode }) => {
  const v6 = mode === 'v6';
  const ai = v6 ? 'ai-6' : 'ai';
  const { version } = JSON.parse(readFileSync(here(`node_modules/${ai}/package.json`), 'utf8'));
  return {
    // Relative asset URLs: the same page serves at `/` and under `/apps/<name>/` (an agents
    // folder, adk-stream-protocol serve DIR).
    base: './',
    esbuild: { jsx: 'automatic' },
    define: { __AI_VERSION__: JSON.stringify(version) },
    resolve: {
      // Exact names only: `ai/...` subpaths and other packages stay as they are.
      alias: v6
        ? [
            { find: /^ai$/, replacement: 'ai-6' },
            { find: /^@ai-sdk\/react$/, replacement: '@ai-sdk/react-3' },
            { find: /^\.\/ai7-only$/, replacement: here('src/ai7-only.ai6.ts') },
          ]
        : [],
      // One copy of `ai` and of React in the bundle, whoever imports them (our transport,
      // adk-stream-protocol-client, is installed here from the client's npm tarball).
      dedupe: ['ai', 'ai-6', '@ai-sdk/react', '@ai-sdk/react-3', 'react', 'react-dom'],
    },
    server: { proxy },
    preview: { proxy },
    build: {
      outDir: v6 ? 'dist-v6' : 'dist',
      assetsDir: 'assets',
      // Every asset a file of its own: the page's Content-Security-Policy allows no data: scripts.
      assetsInlineLimit: 0,
      emptyOutDir: true,
      rollupOptions: {
        onwarn(warning, warn) {
          // Harmless for a client-only bundle: swr's "use client" and zod's
          // comment placement.
          if (warning.code === 'MODULE_LEVEL_DIRECTIVE' || warning.code === 'INVALID_ANNOTATION') return;
          warn(warning);
        },
      },
    },
  };
});
