import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate } from 'node:timers/promises';
import Docker from 'dockerode';
import { pino } from 'pino';
import { reasons } from '@orloj/common/domain';
import { needService } from '@orloj/common/test-support';
import {
  ContainerExecutor,
  dockerOptionsFromHost,
  type ContainerLogLine,
  type ContainerRunHooks,
  type ContainerRunResult,
  type ContainerRunSpec,
} from '../src/executors/container.executor.js';

const logger = pino({ level: 'silent' });
/** Built by scripts/container-runtime.sh: static busybox, no CMD. */
const IMAGE = 'localhost/orloj-test/busybox:1';
/** Every container of this test run carries this label, so leftovers are ours to find. */
const RUN_LABEL = 'orloj.test_run';
const runId = randomBytes(6).toString('hex');

describe('dockerOptionsFromHost', () => {
  it('parses unix, bare path and tcp DOCKER_HOST values', () => {
    assert.deepEqual(dockerOptionsFromHost('unix:///var/run/docker.sock'), { socketPath: '/var/run/docker.sock' });
    assert.deepEqual(dockerOptionsFromHost('/run/podman/podman.sock'), { socketPath: '/run/podman/podman.sock' });
    assert.deepEqual(dockerOptionsFromHost('tcp://10.0.0.5:2375'), { host: '10.0.0.5', port: 2375, protocol: 'http' });
    assert.deepEqual(dockerOptionsFromHost('tcp://docker'), { host: 'docker', port: 2375, protocol: 'http' });
    assert.deepEqual(dockerOptionsFromHost('tcp://[::1]:2375'), { host: '::1', port: 2375, protocol: 'http' });
    assert.throws(() => dockerOptionsFromHost('npipe:////./pipe/docker_engine'), /unsupported DOCKER_HOST/);
    assert.throws(() => dockerOptionsFromHost('not a url'), /unsupported DOCKER_HOST/);
    assert.throws(() => dockerOptionsFromHost('unix://'), /no socket path/);
  });
});

describe('ContainerExecutor with an unreachable runtime', () => {
  for (const dockerHost of ['unix:///nonexistent/orloj/docker.sock', 'tcp://127.0.0.1:1']) {
    it(`reports the runtime as unavailable (${dockerHost.split(':')[0]})`, async () => {
      const ex = new ContainerExecutor({ dockerHost, logger });
      assert.equal(await ex.ping(), false);
      assert.deepEqual(await ex.ensureImage(IMAGE), { ok: false, reason: reasons.runtimeUnavailable() });
      const lines: ContainerLogLine[] = [];
      const result = await ex.run(
        { jobId: 'job-unreachable', image: IMAGE, cmd: ['true'], env: {}, timeoutMs: 5000, network: 'none' },
        { onLine: (l) => void lines.push(l) },
      );
      assert.equal(result.status, 'FAILED');
      assert.ok(result.status === 'FAILED');
      assert.deepEqual(result.reason, reasons.runtimeUnavailable());
      assert.equal(result.reason.code, 'SYSTEM_ERROR');
      assert.equal(result.containerId, undefined);
      assert.equal(lines.length, 0);
    });
  }
});

/** One frame of Docker's multiplexed attach stream. */
function logFrame(stream: 1 | 2, text: string): Buffer {
  const body = Buffer.from(text, 'utf8');
  const head = Buffer.alloc(8);
  head[0] = stream;
  head.writeUInt32BE(body.length, 4);
  return Buffer.concat([head, body]);
}

/**
 * A scripted stand-in for the Engine API on a unix socket, for failures a real
 * runtime cannot be made to show on demand (it crashing mid-run, a log stream
 * that never ends).
 */
class FakeRuntime {
  readonly dir = mkdtempSync(join(tmpdir(), 'orloj-fake-docker-'));
  readonly socket = join(this.dir, 'docker.sock');
  readonly requests: string[] = [];
  /** Each request's URL, query included. */
  readonly urls: string[] = [];
  private readonly server: http.Server;
  private readonly sockets = new Set<import('node:net').Socket>();

  constructor(
    handler: (req: http.IncomingMessage, res: http.ServerResponse, fake: FakeRuntime) => void,
    /** The component /version names: a Docker Engine, or 'Podman Engine'. */
    engine = 'Engine',
  ) {
    this.server = http.createServer((req, res) => {
      this.requests.push(`${req.method} ${(req.url ?? '').split('?')[0]}`);
      this.urls.push(req.url ?? '');
      req.resume();
      // What the executor asks once about the runtime: a Docker with user namespace remapping (or a Podman).
      if (/\/version$/.test(req.url ?? '')) return json(res, 200, { Version: '1', Components: [{ Name: engine, Version: '1' }] });
      if (/\/info$/.test(req.url ?? '')) return json(res, 200, { SecurityOptions: ['name=seccomp,profile=default', 'name=userns'] });
      // Every image is present, under the name asked for.
      const image = /\/images\/(.+)\/json$/.exec((req.url ?? '').split('?')[0] ?? '');
      if (image) return json(res, 200, { Id: `sha256:${'e'.repeat(64)}`, RepoTags: [decodeURIComponent(image[1]!)], RepoDigests: [] });
      handler(req, res, this);
    });
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(this.socket, resolve));
    return `unix://${this.socket}`;
  }

  /** Like a crashed daemon: every open connection is cut. */
  crash(): void {
    this.server.close();
    for (const s of this.sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.crash();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

describe('ContainerExecutor with a scripted runtime', () => {
  const id = 'f'.repeat(64);
  let fake: FakeRuntime | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });

  it('fails with SYSTEM_ERROR when the runtime goes away mid-run, keeping the lines so far', async () => {
    fake = new FakeRuntime((req, res, f) => {
      const url = req.url ?? '';
      if (url.startsWith('/containers/create')) return json(res, 201, { Id: id, Warnings: [] });
      if (url.endsWith('/start')) return void res.writeHead(204).end();
      if (url.includes('/attach')) {
        res.writeHead(200, { 'content-type': 'application/vnd.docker.raw-stream' });
        res.write(logFrame(1, 'before the crash\n'));
        return;
      }
      if (url.endsWith('/wait')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.flushHeaders();
        // The daemon dies while the job runs.
        setTimeout(() => f.crash(), 50); // the daemon dies after the executor is waiting on it
        return;
      }
      json(res, 404, { message: 'no such thing' });
    });
    const ex = new ContainerExecutor({ dockerHost: await fake.listen(), logger });
    const lines: ContainerLogLine[] = [];
    const result = await ex.run(
      { jobId: 'j', image: 'img:1', cmd: ['x'], env: {}, timeoutMs: 10_000, network: 'none' },
      { onLine: (l) => void lines.push(l) },
    );
    assert.ok(result.status === 'FAILED', `got ${result.status}`);
    assert.deepEqual(result.reason, reasons.runtimeUnavailable());
    assert.equal(result.containerId, id);
    assert.deepEqual(
      lines.map((l) => l.message),
      ['before the crash'],
    );
  });

  it('closes a log stream that stays open after the container exited, delivering every line', async () => {
    fake = new FakeRuntime((req, res) => {
      const url = req.url ?? '';
      if (url.startsWith('/containers/create')) return json(res, 201, { Id: id, Warnings: [] });
      if (url.endsWith('/start')) return void res.writeHead(204).end();
      if (url.includes('/attach')) {
        res.writeHead(200, { 'content-type': 'application/vnd.docker.raw-stream' });
        res.write(Buffer.concat([logFrame(1, 'out\n'), logFrame(2, 'partial without newline')]));
        return; // never ends
      }
      if (url.endsWith('/wait')) return json(res, 200, { StatusCode: 0 });
      if (req.method === 'DELETE') return void res.writeHead(204).end();
      json(res, 404, { message: 'no such thing' });
    });
    const ex = new ContainerExecutor({ dockerHost: await fake.listen(), logger, logDrainIdleMs: 100 });
    const lines: ContainerLogLine[] = [];
    const result = await ex.run(
      { jobId: 'j', image: 'img:1', cmd: ['x'], env: {}, timeoutMs: 10_000, network: 'none' },
      { onLine: (l) => void lines.push(l) },
    );
    assert.equal(result.status, 'COMPLETED');
    assert.deepEqual(
      lines.map((l) => `${l.stream}:${l.message}`),
      ['stdout:out', 'stderr:partial without newline'],
    );
    assert.ok(fake.requests.includes(`DELETE /containers/${id}`), 'the container was not removed');
  });

  /** A runtime whose output ends at once and whose wait answers only when `waitAnswer` says so. */
  function exitingRuntime(inspect: (res: http.ServerResponse) => void, waitAnswer?: unknown, removed = true): FakeRuntime {
    return new FakeRuntime((req, res) => {
      const url = req.url ?? '';
      if (url.startsWith('/containers/create')) return json(res, 201, { Id: id, Warnings: [] });
      if (url.endsWith('/start')) return void res.writeHead(204).end();
      if (url.includes('/attach')) {
        res.writeHead(200, { 'content-type': 'application/vnd.docker.raw-stream' });
        return void res.end(logFrame(1, 'bye\n'));
      }
      if (url.endsWith('/wait')) {
        if (waitAnswer !== undefined) return void setTimeout(() => json(res, 200, waitAnswer), 50); // a daemon that answers late: the executor is waiting by then
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.flushHeaders(); // Podman's wait, much slower than the exit
      }
      if (req.method === 'GET' && url.startsWith(`/containers/${id}/json`)) return inspect(res);
      if (url.endsWith('/_ping')) return void res.writeHead(200).end('OK');
      if (req.method === 'DELETE') return removed ? void res.writeHead(204).end() : json(res, 404, { message: `no such container ${id}` });
      json(res, 404, { message: 'no such thing' });
    });
  }

  const exited = (code: number) => (res: http.ServerResponse) => json(res, 200, { Id: id, State: { Status: 'exited', Running: false, ExitCode: code } });
  const runSpec: ContainerRunSpec = { jobId: 'j', image: 'img:1', cmd: ['x'], env: {}, timeoutMs: 10_000, network: 'none' };

  it('takes a clean exit from an inspection once the output ends, without waiting for wait', async () => {
    fake = exitingRuntime(exited(0));
    const ex = new ContainerExecutor({ dockerHost: await fake.listen(), logger });
    const lines: ContainerLogLine[] = [];
    const result = await ex.run(runSpec, { onLine: (l) => void lines.push(l) });
    assert.equal(result.status, 'COMPLETED');
    assert.deepEqual(
      lines.map((l) => l.message),
      ['bye'],
    );
    assert.ok(fake.requests.includes(`DELETE /containers/${id}`), 'the container was not removed');
  });

  it("waits on Podman through its own endpoint, which polls, not Docker's, which spins on Podman before 4.5", async () => {
    // Podman answers the exit code alone (`0\n`, which dockerode hands over as raw bytes: 0 is no JSON it keeps).
    for (const [code, expected] of [
      [0, 'COMPLETED'],
      [5, 'FAILED'],
    ] as const) {
      await fake?.close();
      // Only wait can tell the exit: the output stays open and the inspections still say running.
      fake = new FakeRuntime((req, res) => {
        const url = req.url ?? '';
        if (url.startsWith('/containers/create')) return json(res, 201, { Id: id, Warnings: [] });
        if (url.endsWith('/start')) return void res.writeHead(204).end();
        if (url.includes('/attach')) return void res.writeHead(200, { 'content-type': 'application/vnd.docker.raw-stream' }).write(logFrame(1, 'hi\n'));
        if (url.startsWith(`/v4.0.0/libpod/containers/${id}/wait?`)) return void res.writeHead(200, { 'content-type': 'text/plain; charset=us-ascii' }).end(`${code}\n`);
        if (req.method === 'GET' && url.startsWith(`/containers/${id}/json`)) return json(res, 200, { Id: id, State: { Status: 'running', Running: true } });
        if (req.method === 'DELETE') return void res.writeHead(204).end();
        json(res, 404, { message: 'no such thing' });
      }, 'Podman Engine');
      const ex = new ContainerExecutor({ dockerHost: await fake.listen(), logger, logDrainIdleMs: 100 });
      const result = await ex.run(runSpec, { onLine: () => undefined });
      assert.equal(result.status, expected, JSON.stringify(result));
      if (result.status === 'FAILED') assert.deepEqual(result.reason, reasons.nonZeroExit(5));
      const waits = fake.urls.filter((u) => u.includes('/wait'));
      assert.deepEqual(waits, [`/v4.0.0/libpod/containers/${id}/wait?condition=stopped&condition=exited&interval=250ms`]);
    }
  });

  it('never starts a container it could not attach to: its output would be lost', async () => {
    for (const [attach, reason] of [
      // The runtime refused the attach.
      [(res: http.ServerResponse) => json(res, 500, { message: 'attach failed' }), reasons.containerStartFailed()],
      // The runtime did not answer within the API timeout (a loaded Podman, seen in a stress run).
      [(res: http.ServerResponse) => void res.on('close', () => undefined), reasons.runtimeUnavailable()],
    ] as const) {
      await fake?.close();
      fake = new FakeRuntime((req, res) => {
        const url = req.url ?? '';
        if (url.startsWith('/containers/create')) return json(res, 201, { Id: id, Warnings: [] });
        if (url.includes('/attach')) return attach(res);
        if (url.endsWith('/_ping')) return void res.writeHead(200).end('OK');
        if (req.method === 'DELETE') return void res.writeHead(204).end();
        json(res, 404, { message: 'no such thing' });
      });
      const ex = new ContainerExecutor({ dockerHost: await fake.listen(), logger, apiTimeoutMs: 300 });
      const result = await ex.run(runSpec, { onLine: () => undefined });
      assert.ok(result.status === 'FAILED', `got ${result.status}`);
      assert.deepEqual(result.reason, reason);
      assert.ok(!fake.requests.some((r) => r.endsWith('/start')), 'the container was started');
      assert.ok(fake.requests.includes(`DELETE /containers/${id}`), 'the container was not removed');
    }
  });

  it('leaves a non-zero exit to wait and the inspection after it', async () => {
    fake = exitingRuntime(exited(3), { StatusCode: 3 });
    const ex = new ContainerExecutor({ dockerHost: await fake.listen(), logger });
    const result = await ex.run(runSpec, { onLine: () => undefined });
    assert.ok(result.status === 'FAILED', `got ${result.status}`);
    assert.deepEqual(result.reason, reasons.nonZeroExit(3));
  });

  it('reports a clean exit as removed from outside when the container was gone before our removal', async () => {
    fake = exitingRuntime(exited(0), undefined, false);
    const ex = new ContainerExecutor({ dockerHost: await fake.listen(), logger });
    const result = await ex.run(runSpec, { onLine: () => undefined });
    assert.ok(result.status === 'FAILED', `got ${result.status}`);
    assert.deepEqual(result.reason, reasons.containerRemoved());
  });

  it('waits for wait when the output ends but the container still runs', async () => {
    fake = exitingRuntime((res) => json(res, 200, { Id: id, State: { Status: 'running', Running: true, ExitCode: 0 } }), { StatusCode: 4 });
    const ex = new ContainerExecutor({ dockerHost: await fake.listen(), logger });
    const result = await ex.run(runSpec, { onLine: () => undefined });
    assert.ok(result.status === 'FAILED', `got ${result.status}`);
    assert.deepEqual(result.reason, reasons.nonZeroExit(4));
  });

  it('reports a container gone when its output ends as removed from outside, never COMPLETED', async () => {
    fake = exitingRuntime((res) => json(res, 404, { message: `no such container ${id}` }));
    const ex = new ContainerExecutor({ dockerHost: await fake.listen(), logger });
    const result = await ex.run(runSpec, { onLine: () => undefined });
    assert.ok(result.status === 'FAILED', `got ${result.status}`);
    assert.deepEqual(result.reason, reasons.containerRemoved());
  });
});

describe('ContainerExecutor against a real runtime', function () {
  this.timeout(30_000);
  let docker: Docker;
  let executor: ContainerExecutor;

  before(async function () {
    const host = needService(this, 'docker');
    docker = new Docker(dockerOptionsFromHost(host));
    executor = new ContainerExecutor({ dockerHost: host, logger });
    assert.equal(await executor.ping(), true, `the runtime at ${host} does not answer`);
    const image = await executor.ensureImage(IMAGE);
    assert.deepEqual(image, { ok: true }, `${IMAGE} is missing: run scripts/container-runtime.sh ensure`);
  });

  async function ourContainers(extra: string[] = []): Promise<Docker.ContainerInfo[]> {
    return docker.listContainers({ all: true, filters: { label: [`${RUN_LABEL}=${runId}`, ...extra] } });
  }

  afterEach(async function () {
    if (!docker) return;
    const left = await ourContainers();
    // Clean up for the next test, then fail this one.
    for (const c of left) await docker.getContainer(c.Id).remove({ force: true });
    assert.deepEqual(
      left.map((c) => c.Names),
      [],
      'a container was left behind',
    );
  });

  let seq = 0;
  function spec(cmd: string[], extra: Partial<ContainerRunSpec> = {}): ContainerRunSpec {
    return {
      jobId: `test-${runId}-${++seq}`,
      image: IMAGE,
      cmd,
      env: {},
      timeoutMs: 20_000,
      network: 'none',
      labels: { [RUN_LABEL]: runId },
      ...extra,
    };
  }

  async function run(
    s: ContainerRunSpec,
    hooks: Partial<ContainerRunHooks> = {},
  ): Promise<{ result: ContainerRunResult; lines: ContainerLogLine[]; out: string[]; err: string[] }> {
    const lines: ContainerLogLine[] = [];
    const result = await executor.run(s, {
      onLine: (l) => {
        lines.push(l);
        return hooks.onLine?.(l);
      },
      ...(hooks.signal ? { signal: hooks.signal } : {}),
    });
    return {
      result,
      lines,
      out: lines.filter((l) => l.stream === 'stdout').map((l) => l.message),
      err: lines.filter((l) => l.stream === 'stderr').map((l) => l.message),
    };
  }

  it('reports a container removed from outside as a SYSTEM failure, never COMPLETED', async () => {
    const s = spec(['sh', '-c', 'echo started; sleep 30']);
    const running = run(s, {
      onLine: async (l) => {
        if (l.message !== 'started') return;
        // Another runner's sweep, or an operator's `rm -f`, while it runs.
        const [c] = await ourContainers([`orloj.job_id=${s.jobId}`]);
        if (c) void docker.getContainer(c.Id).remove({ force: true });
      },
    });
    const { result, out } = await running;
    assert.equal(result.status, 'FAILED');
    assert.ok(result.status === 'FAILED' && result.reason.code === 'SYSTEM_ERROR', JSON.stringify(result));
    assert.deepEqual(out, ['started']);
  });

  it('completes, streaming both streams line by line in order', async () => {
    const script = [
      'echo "first $GREETING"',
      'echo "err 1" >&2',
      'echo',
      "printf 'unicode \\303\\251\\342\\202\\254\\360\\237\\230\\200 \\342\\234\\223\\n'",
      'echo "err 2" >&2',
      "head -c 102400 /dev/zero | tr '\\000' x; echo",
      "printf 'crlf\\r\\n'",
      'echo "err 3 without newline" | tr -d "\\n" >&2',
      "printf 'no newline at the end'",
    ].join('\n');
    const s = spec(['sh', '-c', script], { env: { GREETING: 'hello world' } });
    const t0 = Date.now();
    const { result, lines, out, err } = await run(s);

    assert.equal(result.status, 'COMPLETED');
    assert.ok(result.status === 'COMPLETED');
    assert.equal(result.exitCode, 0);
    assert.match(result.containerId ?? '', /^[0-9a-f]{64}$/);
    assert.ok(result.startedAt !== undefined && result.startedAt >= t0);
    assert.ok(result.finishedAt >= result.startedAt);
    assert.equal(result.lineCount, lines.length);

    const x = 'x'.repeat(16384);
    assert.deepEqual(out, [
      'first hello world',
      '',
      'unicode é€😀 ✓',
      x, x, x, x, x, x, 'x'.repeat(4096),
      'crlf',
      'no newline at the end',
    ]);
    assert.deepEqual(err, ['err 1', 'err 2', 'err 3 without newline']);
    for (const l of lines) {
      // Runtime timestamps may be whole seconds, so allow the second before the start.
      assert.ok(l.timestamp >= t0 - 1000 && l.timestamp <= result.finishedAt, `timestamp of ${l.message.slice(0, 20)}`);
    }
  });

  it('fails with NON_ZERO_EXIT naming the exit code', async () => {
    const { result, out } = await run(spec(['sh', '-c', 'echo bye; exit 3']));
    assert.equal(result.status, 'FAILED');
    assert.ok(result.status === 'FAILED');
    assert.deepEqual(result.reason, reasons.nonZeroExit(3));
    assert.match(result.reason.message, /\b3\b/);
    assert.equal(result.exitCode, 3);
    assert.deepEqual(out, ['bye']);
  });

  it('kills a container that overruns its time limit: TIME_LIMIT_EXCEEDED', async () => {
    // Killed before its sleep ends: a kill that waited it out would print "woke".
    const { result, out } = await run(spec(['sh', '-c', 'echo going to sleep; sleep 30; echo woke'], { timeoutMs: 1000 }));
    assert.equal(result.status, 'FAILED');
    assert.ok(result.status === 'FAILED');
    assert.deepEqual(result.reason, reasons.timeLimitExceeded(1000));
    assert.equal(result.reason.code, 'TIME_LIMIT_EXCEEDED');
    assert.deepEqual(out, ['going to sleep']);
  });

  it('returns CANCELED when the signal aborts a running container, keeping the lines so far', async () => {
    const controller = new AbortController();
    // Killed before its sleep ends: a kill that waited it out would print "never".
    const { result, out } = await run(spec(['sh', '-c', 'echo started; sleep 30; echo never']), {
      onLine: (l) => {
        if (l.message === 'started') controller.abort();
      },
      signal: controller.signal,
    });
    assert.equal(result.status, 'CANCELED');
    assert.deepEqual(out, ['started']);
    assert.ok(result.containerId);
  });

  it('returns CANCELED without creating anything for an already aborted signal', async () => {
    const controller = new AbortController();
    controller.abort();
    const { result, lines } = await run(spec(['echo', 'never']), { signal: controller.signal });
    assert.equal(result.status, 'CANCELED');
    assert.equal(result.containerId, undefined);
    assert.equal(lines.length, 0);
  });

  it('returns CANCELED when the signal aborts while the container is being created', async () => {
    const controller = new AbortController();
    const pending = executor.run(spec(['sh', '-c', 'echo started; sleep 30']), {
      onLine: () => undefined,
      signal: controller.signal,
    });
    controller.abort();
    const result = await pending;
    assert.equal(result.status, 'CANCELED');
  });

  it('ensureImage fails with IMAGE_PULL_FAILED for an image that cannot be pulled', async () => {
    const missing = `localhost/orloj-test/does-not-exist-${runId}:1`;
    assert.deepEqual(await executor.ensureImage(missing), { ok: false, reason: reasons.imagePullFailed() });
    // run() does not pull: a missing image at create is the same reason.
    const { result } = await run(spec(['true'], { image: missing }));
    assert.ok(result.status === 'FAILED');
    assert.deepEqual(result.reason, reasons.imagePullFailed());
  });

  it('fails with EXECUTION_FAILED when the container cannot start', async () => {
    const { result, lines } = await run(spec(['/no/such/program']));
    assert.ok(result.status === 'FAILED', `got ${result.status}`);
    assert.deepEqual(result.reason, reasons.containerStartFailed());
    assert.equal(lines.length, 0);
  });

  it('gives containers no network but loopback', async () => {
    const script = 'cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "; if wget -q -T 2 -O /dev/null http://1.1.1.1/; then echo CONNECTED; else echo NO_ROUTE; fi';
    const { result, out } = await run(spec(['sh', '-c', script]));
    assert.equal(result.status, 'COMPLETED');
    assert.deepEqual(out, ['lo', 'NO_ROUTE']);
  });

  it('hardens and labels every container', async () => {
    const controller = new AbortController();
    let inspected: Docker.ContainerInspectInfo | undefined;
    const s = spec(['sh', '-c', 'grep -E "^(CapEff|CapPrm|NoNewPrivs):" /proc/self/status; echo ready; sleep 30'], {
      memoryMb: 64,
      cpus: 0.5,
    });
    const { result, out } = await run(s, {
      onLine: async (l) => {
        if (l.message !== 'ready') return;
        const [info] = await ourContainers([`orloj.job_id=${s.jobId}`]);
        assert.ok(info, 'the running container is not found by its labels');
        inspected = await docker.getContainer(info.Id).inspect();
        controller.abort();
      },
      signal: controller.signal,
    });
    assert.equal(result.status, 'CANCELED');
    assert.deepEqual(out, ['CapPrm:\t0000000000000000', 'CapEff:\t0000000000000000', 'NoNewPrivs:\t1', 'ready']);
    assert.ok(inspected);
    const hc = inspected.HostConfig;
    assert.equal(hc.Privileged, false);
    assert.equal(hc.NetworkMode, 'none');
    assert.deepEqual(hc.SecurityOpt, ['no-new-privileges']);
    assert.equal(hc.Memory, 64 * 1024 * 1024);
    assert.equal(hc.PidsLimit, 256);
    assert.equal(hc.NanoCpus, 500_000_000);
    assert.deepEqual(hc.Binds ?? [], []);
    assert.deepEqual(inspected.Mounts ?? [], []);
    assert.equal(inspected.Config.Labels['orloj.managed'], 'true');
    assert.equal(inspected.Config.Labels['orloj.job_id'], s.jobId);
    assert.match(inspected.Name, new RegExp(`^/?orloj-${s.jobId}-[0-9a-f]{8}$`));
  });

  it('waits for a slow onLine (back-pressure) and loses no line', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const { result, out } = await run(spec(['sh', '-c', 'seq 1 3000; seq 1 500 >&2']), {
      onLine: async () => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await setImmediate();
        inFlight--;
      },
    });
    assert.equal(result.status, 'COMPLETED');
    assert.equal(maxInFlight, 1, 'onLine was called again before its promise settled');
    assert.deepEqual(
      out,
      Array.from({ length: 3000 }, (_, i) => String(i + 1)),
    );
  });

  it('loses no line of a container that writes fast (Podman 4 follow streams did)', async () => {
    const n = 100_000;
    const { result, out, err } = await run(spec(['sh', '-c', `awk 'BEGIN { for (i = 1; i <= ${n}; i++) print "fast " i }'; echo done >&2`]));
    assert.equal(result.status, 'COMPLETED');
    assert.equal(result.lineCount, n + 1);
    const firstWrong = out.findIndex((l, i) => l !== `fast ${i + 1}`);
    assert.equal(firstWrong, -1, `stdout line ${firstWrong} is ${JSON.stringify(out[firstWrong])}`);
    assert.equal(out.length, n);
    assert.deepEqual(err, ['done']);
  });

  it('pauses the container while onLine is pending: back-pressure reaches its output', async () => {
    // The container writes 50 000 lines (5 MB), then stamps the time. The reader stalls 1.5 s
    // after the first line; a container writing into a pipe nobody reads has to wait.
    let stalled = false;
    let resumedAt = 0;
    const { result, err } = await run(spec(['sh', '-c', `awk 'BEGIN { for (i = 1; i <= 50000; i++) print "line " i, "${'x'.repeat(100)}" }'; date +%s >&2`]), {
      onLine: async () => {
        if (stalled) return;
        stalled = true;
        await new Promise((r) => setTimeout(r, 1_500)); // a slow consumer: the executor must hold the output while real time passes
        resumedAt = Date.now();
      },
    });
    assert.equal(result.status, 'COMPLETED');
    const finishedWriting = Number(err[0]) * 1000;
    assert.ok(finishedWriting >= Math.floor(resumedAt / 1000) * 1000, 'the container finished writing while its output was not read');
  });

  it('rejects when onLine throws, after killing and removing the container', async () => {
    const boom = new Error('sink down');
    await assert.rejects(
      executor.run(spec(['sh', '-c', 'echo one; sleep 30']), {
        onLine: () => {
          throw boom;
        },
      }),
      (e) => e === boom,
    );
  });

  it('removeOrphans removes only managed containers matching the filter', async () => {
    const mk = (labels: Record<string, string>, name: string): Promise<Docker.Container> =>
      docker.createContainer({
        name: `orloj-test-${runId}-${name}`,
        Image: IMAGE,
        Cmd: ['sleep', '30'],
        Labels: { [RUN_LABEL]: runId, ...labels },
        HostConfig: { NetworkMode: 'none' },
      });
    const running = await mk({ 'orloj.managed': 'true', 'orloj.job_id': 'x' }, 'running');
    await running.start();
    const created = await mk({ 'orloj.managed': 'true', 'orloj.job_id': 'y' }, 'created');
    const foreign = await mk({}, 'foreign');
    try {
      const removed = await executor.removeOrphans({ [RUN_LABEL]: runId });
      assert.deepEqual(removed.sort(), [running.id, created.id].sort());
      const left = await ourContainers();
      assert.deepEqual(
        left.map((c) => c.Id),
        [foreign.id],
      );
      assert.deepEqual(await executor.removeOrphans({ [RUN_LABEL]: runId }), []);
    } finally {
      await foreign.remove({ force: true });
    }
  });
});
