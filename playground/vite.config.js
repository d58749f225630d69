// Vite 7 without @vitejs/plugin-react: esbuild compiles the JSX (automatic runtime).
// `vite` / `vite preview` proxy /stream and /live to the server (ADK_STREAM_URL,
// default http://127.0.0.1:8000), so the page calls the API on its own origin,
// as it does when the FastAPI server serves dist/ at /.
import { defineConfig } from 'vite';

const target = process.env.ADK_STREAM_URL ?? 'http://127.0.0.1:8000';
const proxy = {
  '/stream': { target, changeOrigin: true },
  '/live': { target, ws: true, changeOrigin: true },
};

export default defineConfig({
  base: '/',
  esbuild: { jsx: 'automatic' },
  // The transport in ../client is a symlinked package: use this folder's
  // copies of `ai` and React, so the bundle holds one of each.
  resolve: { dedupe: ['ai', 'react', 'react-dom'] },
  server: { proxy },
  preview: { proxy },
  build: {
    outDir: 'dist',
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
});
