import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// `npm run dev -w @orloj/dashboard` serves the app on :5173 and forwards /api to
// an orloj started with `npm start` (ORLOJ_URL overrides), so the browser sees
// one origin as it does in production. orloj refuses mutating requests whose
// Origin is not its own; the proxy presents the page's as orloj's (dev only).
// Vite only: a production install (no dev dependencies) builds with this file;
// the component tests' settings are in vitest.config.ts.
const target = globalThis.process?.env.ORLOJ_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  plugins: [react()],
  server: {
    proxy: {
      '/api': { target, changeOrigin: true, headers: { origin: new URL(target).origin } },
    },
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: true,
  },
});
