import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { tempDir } from '@orloj/common/test-support';
import { startOrloj, type RunningOrloj } from '../src/main.js';
import { signalSection } from './support/operations-doc.js';

/**
 * The embedded process (every role, SQLite, the in-process bus) serves the
 * probes and the metrics of all its roles on the api's port, and opens no
 * other port.
 */
describe('embedded process: probes and metrics on the api port', function () {
  this.timeout(60_000);
  let dir: string;
  let orloj: RunningOrloj | undefined;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-embedded-obs-'));
    orloj = await startOrloj({ roles: ['api', 'scheduler', 'runners', 'log-ingest', 'notifier'], env: { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'silent', OPS_PORT: '1' } });
  });

  after(async () => {
    await orloj?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers /livez, /readyz and /metrics with every role in them', async () => {
    assert.equal(orloj!.opsPort, undefined, 'no ops port beside the api (OPS_PORT=1 would not even be bindable)');
    const base = `http://127.0.0.1:${orloj!.port}`;
    assert.equal((await fetch(`${base}/livez`)).status, 200);
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { ready: true, checks: { roles: { ok: true }, store: { ok: true }, bus: { ok: true }, keys: { ok: true } } });
    const text = await (await fetch(`${base}/metrics`)).text();
    for (const series of [
      /^orloj_scheduler_leader 1$/m,
      /^orloj_scheduler_jobs_recovered_after_restart_total 0$/m,
      /^orloj_scheduler_jobs_refused_total 0$/m,
      /^orloj_jobs\{status="QUEUED"\} 0$/m,
      /^orloj_bus_connected 1$/m,
      /^orloj_ready 1$/m,
      /^orloj_notifier_backlog_events \d+$/m,
      /^orloj_log_lines_stored_total 0$/m,
      /^orloj_log_lines_captured_total 0$/m,
      /^orloj_live_tail_subscribers 0$/m,
      /^orloj_runner_jobs_running 0$/m,
      /^orloj_http_request_duration_seconds_count\{method="GET",route="\/readyz",status="200"\} 1$/m,
    ]) {
      assert.match(text, series);
    }
    // The in-process bus reports depths too: the leader's view of the queues.
    assert.match(text, /^# TYPE orloj_bus_queue_messages gauge$/m);
  });

  it('exports only metrics whose meaning and remedy docs/operations.md gives', async () => {
    const text = await (await fetch(`http://127.0.0.1:${orloj!.port}/metrics`)).text();
    // Every role runs here, so every orloj family is described (# HELP), with samples or not.
    const families = [...text.matchAll(/^# HELP (orloj_\w+)/gm)].map((m) => m[1]!);
    assert.ok(families.length >= 20, families.join(' '));
    for (const family of [...families, 'nodejs_eventloop_lag_p99_seconds', 'process_resident_memory_bytes']) signalSection(family);
  });

  it('refuses other methods on the probe paths', async () => {
    const res = await fetch(`http://127.0.0.1:${orloj!.port}/readyz`, { method: 'POST' });
    assert.equal(res.status, 405);
  });
});


describe('a process without the api: probes and metrics on OPS_PORT', function () {
  this.timeout(60_000);
  const dir = tempDir('orloj-ops-port-');

  it('serves them on OPS_PORT, and refuses to start naming OPS_PORT when it is taken', async () => {
    const runners = await startOrloj({ roles: ['runners'], env: { DATA_DIR: dir(), OPS_PORT: '0', LOG_LEVEL: 'silent' } });
    try {
      assert.equal(runners.port, undefined);
      const base = `http://127.0.0.1:${runners.opsPort}`;
      assert.equal((await fetch(`${base}/livez`)).status, 200);
      assert.deepEqual(await (await fetch(`${base}/readyz`)).json(), { ready: true, checks: { roles: { ok: true }, bus: { ok: true }, keys: { ok: true } } });
      assert.match(await (await fetch(`${base}/metrics`)).text(), /^orloj_runner_jobs_running 0$/m);
      assert.equal((await fetch(`${base}/api/workflows`)).status, 404);
      await assert.rejects(
        startOrloj({ roles: ['runners'], env: { DATA_DIR: dir(), OPS_PORT: String(runners.opsPort), LOG_LEVEL: 'silent' } }),
        /cannot listen on OPS_PORT \d+ at 127\.0\.0\.1 \(EADDRINUSE\)/,
      );
    } finally {
      await runners.stop();
    }
  });
});
