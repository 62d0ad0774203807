/**
 * What the dashboard's build leaves for the server to send: a Brotli and a
 * gzip copy beside each text file (dashboard/vite.config.ts), each decoding
 * to the file itself, so a first load fetches the app's script at about a
 * third of its size without the server compressing anything per request.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { requireServices } from '@orloj/common/test-support';
import { DASHBOARD_DIST } from './support/orloj.js';

describe('dashboard build: precompressed files', () => {
  before(function () {
    if (fs.existsSync(path.join(DASHBOARD_DIST, 'index.html'))) return;
    if (requireServices) throw new Error('REQUIRE_SERVICES=1 but the dashboard is not built (npm run build)');
    this.skip();
  });

  it('writes a .br and a .gz beside the app script, its styles and index.html, each decoding to the file', () => {
    const assets = fs.readdirSync(path.join(DASHBOARD_DIST, 'assets')).filter((f) => /\.(js|css)$/.test(f));
    assert.ok(assets.some((f) => f.endsWith('.js')) && assets.some((f) => f.endsWith('.css')), `assets: ${assets.join(', ')}`);
    for (const file of ['index.html', ...assets.map((f) => path.join('assets', f))]) {
      const raw = fs.readFileSync(path.join(DASHBOARD_DIST, file));
      const br = fs.readFileSync(path.join(DASHBOARD_DIST, `${file}.br`));
      const gz = fs.readFileSync(path.join(DASHBOARD_DIST, `${file}.gz`));
      assert.ok(zlib.brotliDecompressSync(br).equals(raw), `${file}.br decodes to ${file}`);
      assert.ok(zlib.gunzipSync(gz).equals(raw), `${file}.gz decodes to ${file}`);
      if (file.endsWith('.js')) assert.ok(gz.length < raw.length / 2, `${file}: gzip ${gz.length} of ${raw.length} bytes`);
    }
  });
});
