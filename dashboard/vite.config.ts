import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { defineConfig, type Plugin } from 'vite';
import react from '@vitejs/plugin-react';

// `npm run dev -w @orloj/dashboard` serves the app on :5173 and forwards /api to
// an orloj started with `npm start` (ORLOJ_URL overrides), so the browser sees
// one origin as it does in production. orloj refuses mutating requests whose
// Origin is not its own; the proxy presents the page's as orloj's (dev only).
// Vite only: a production install (no dev dependencies) builds with this file;
// the component tests' settings are in vitest.config.ts.
const target = globalThis.process?.env.ORLOJ_URL ?? 'http://127.0.0.1:8080';

/** Text files worth compressing; source maps are fetched only by developer tools. */
const COMPRESSIBLE = /\.(js|css|html|svg|json)$/;

/**
 * Writes `<file>.br` and `<file>.gz` beside each text file of the build, which
 * the server sends to clients that accept them (@koa/send's brotli and gzip
 * options, api/src/http/dashboard.ts): the app's script is about a third of
 * its size gzipped, and a cold first load waited on the whole of it (issue 26).
 * Done once at build time, at the highest levels, so no request compresses.
 */
function precompress(): Plugin {
  let outDir = 'dist';
  return {
    name: 'orloj-precompress',
    apply: 'build',
    configResolved(config) {
      outDir = path.resolve(config.root, config.build.outDir);
    },
    closeBundle() {
      for (const entry of fs.readdirSync(outDir, { recursive: true, withFileTypes: true })) {
        if (!entry.isFile() || !COMPRESSIBLE.test(entry.name)) continue;
        const file = path.join(entry.parentPath, entry.name);
        const raw = fs.readFileSync(file);
        const br = zlib.brotliCompressSync(raw, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: zlib.constants.BROTLI_MAX_QUALITY } });
        const gz = zlib.gzipSync(raw, { level: zlib.constants.Z_BEST_COMPRESSION });
        if (br.length < raw.length) fs.writeFileSync(`${file}.br`, br);
        if (gz.length < raw.length) fs.writeFileSync(`${file}.gz`, gz);
      }
    },
  };
}

export default defineConfig({
  plugins: [react(), precompress()],
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
