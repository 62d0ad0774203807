import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import { pino } from 'pino';
import { needService } from '@orloj/common/test-support';
import { ContainerExecutor, dockerOptionsFromHost, type ContainerRunSpec } from '../src/executors/container.executor.js';

/**
 * Issue 29, items 3, 4 and 10, against the real runtime: a container cannot
 * touch the host's disk (read-only root, size-limited scratch tmpfs, no
 * runtime log file) and its root is not the host's root (a user namespace of
 * its own on Podman). Each test stops its container at a marker line to look
 * at it from outside while it still exists, then cancels it.
 */
const logger = pino({ level: 'silent' });
const IMAGE = 'localhost/orloj-test/busybox:1';
const RUN_LABEL = 'orloj.test_run';
const runId = randomBytes(6).toString('hex');
const MIB = 1024 * 1024;
/** Small, so filling it is quick. */
const SCRATCH_MB = 16;

/** Bytes of the regular files under a directory (the container's writable layer on the host). */
function bytesUnder(dir: string): number {
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += bytesUnder(full);
    else if (entry.isFile()) total += fs.statSync(full).size;
  }
  return total;
}

describe('container isolation against a real runtime', function () {
  this.timeout(120_000);
  let docker: Docker;
  let host: string;
  let executor: ContainerExecutor;
  let seq = 0;

  before(async function () {
    host = needService(this, 'docker');
    docker = new Docker(dockerOptionsFromHost(host));
    executor = new ContainerExecutor({ dockerHost: host, logger, scratchMb: SCRATCH_MB });
    assert.deepEqual(await executor.ensureImage(IMAGE), { ok: true }, `${IMAGE} is missing: run scripts/container-runtime.sh ensure`);
  });

  afterEach(async function () {
    if (!docker) return;
    const left = await docker.listContainers({ all: true, filters: { label: [`${RUN_LABEL}=${runId}`] } });
    for (const c of left) await docker.getContainer(c.Id).remove({ force: true });
    assert.deepEqual(
      left.map((c) => c.Names),
      [],
      'a container was left behind',
    );
  });

  function spec(script: string): ContainerRunSpec {
    return { jobId: `isolation-${runId}-${++seq}`, image: IMAGE, cmd: ['sh', '-c', script], env: {}, timeoutMs: 90_000, network: 'none', labels: { [RUN_LABEL]: runId } };
  }

  /** A running container seen from outside: its inspection, and the bytes of its files on this host (undefined where they are not here). */
  interface Measured {
    info: Docker.ContainerInspectInfo;
    /** The runtime's count of what the container wrote to its layer on the host. */
    sizeRw: number | undefined;
    /** The files of that layer, where the runtime keeps them on this host. */
    upperBytes: number | undefined;
    /** The runtime's log file of the container's output. */
    logBytes: number | undefined;
  }

  /**
   * Runs the script until it prints `measure`, then looks at its container
   * from outside while it still exists, and cancels it. The stdout lines
   * before the marker and what was measured come back.
   */
  async function runToMarker(script: string, by: ContainerExecutor = executor): Promise<{ out: string[]; measured: Measured }> {
    const s = spec(`${script}\necho measure\nsleep 60`);
    const controller = new AbortController();
    const out: string[] = [];
    let measured: Measured | undefined;
    const result = await by.run(s, {
      signal: controller.signal,
      onLine: async (line) => {
        if (line.message !== 'measure') {
          if (line.stream === 'stdout') out.push(line.message);
          return;
        }
        const [found] = await docker.listContainers({ all: true, size: true, filters: { label: [`orloj.job_id=${s.jobId}`] } });
        assert.ok(found, 'the running container is not found by its label');
        const info = await docker.getContainer(found.Id).inspect();
        const upper = (info.GraphDriver?.Data as { UpperDir?: string } | undefined)?.UpperDir;
        const logPath = (info as { LogPath?: string }).LogPath;
        measured = {
          info,
          sizeRw: (found as { SizeRw?: number }).SizeRw,
          upperBytes: upper && fs.existsSync(upper) ? bytesUnder(upper) : undefined,
          logBytes: logPath && fs.existsSync(logPath) ? fs.statSync(logPath).size : undefined,
        };
        controller.abort();
      },
    });
    assert.equal(result.status, 'CANCELED', JSON.stringify({ result, out }));
    assert.ok(measured, 'the container never printed the marker');
    return { out, measured };
  }

  it('keeps a container off the host disk: read-only root, writes stop at the scratch limit', async () => {
    const script = [
      // /etc: the image's own root directory is not writable without capabilities, /etc is.
      'if dd if=/dev/zero of=/etc/fill bs=1M count=32 2>/tmp/err; then echo "root writable"; else echo "root refused: $(grep -o "Read-only file system" /tmp/err)"; fi',
      'for d in /tmp /var/tmp /run; do',
      '  if dd if=/dev/zero of=$d/fill bs=1M count=64 2>/dev/null; then echo "$d unbounded"; else echo "$d full at $(du -k $d/fill | cut -f1) KiB"; fi',
      '  rm -f $d/fill',
      'done',
      // What images expect of a scratch space: write, read back, run a program from it.
      'printf "#!/bin/sh\\necho ran from /tmp\\n" > /tmp/tool && chmod +x /tmp/tool && /tmp/tool',
    ].join('\n');
    const { out, measured } = await runToMarker(script);
    const scratchKiB = SCRATCH_MB * 1024;
    assert.equal(out[0], 'root refused: Read-only file system', out.join('\n'));
    for (const [i, dir] of ['/tmp', '/var/tmp', '/run'].entries()) {
      const m = new RegExp(`^${dir} full at (\\d+) KiB$`).exec(out[i + 1] ?? '');
      assert.ok(m, `${dir}: ${out[i + 1]}`);
      assert.ok(Number(m[1]) <= scratchKiB && Number(m[1]) > scratchKiB / 2, `${dir} took ${m[1]} KiB with a ${scratchKiB} KiB limit`);
    }
    assert.equal(out[4], 'ran from /tmp');
    assert.equal(measured.info.HostConfig.ReadonlyRootfs, true);
    // Nothing of it reached the host's disk: neither by the runtime's count nor in the layer's files.
    assert.ok(measured.sizeRw !== undefined && measured.sizeRw < MIB, `the writable layer holds ${measured.sizeRw} bytes`);
    if (measured.upperBytes !== undefined) assert.ok(measured.upperBytes < MIB, `the layer's files hold ${measured.upperBytes} bytes`);
  });

  it('keeps no runtime log file of a container that writes fast (the runner reads the output itself)', async () => {
    // About 22 MB of output; a runtime log would hold all of it.
    const { measured } = await runToMarker(`awk 'BEGIN { for (i = 1; i <= 200000; i++) print "line " i " ${'x'.repeat(100)}" }' > /dev/stderr; echo written`);
    if (measured.logBytes !== undefined) assert.ok(measured.logBytes < MIB, `the runtime's log file holds ${measured.logBytes} bytes`);
    assert.equal(measured.info.HostConfig.LogConfig?.Type, 'none');
  });

  it("runs a container's root as an unprivileged host user (a user namespace of its own on Podman)", async () => {
    const { out } = await runToMarker('id -u; head -n 1 /proc/self/uid_map');
    assert.equal(out[0], '0', 'the image still runs as its own root');
    const [inside, outside] = (out[1] ?? '').trim().split(/\s+/).map(Number);
    assert.equal(inside, 0);
    assert.ok(outside !== undefined && outside > 0, `container root is host uid ${outside} (${out[1]})`);
  });

  it('CONTAINER_USERNS=host leaves the user namespace out', async () => {
    const hostUserns = new ContainerExecutor({ dockerHost: host, logger, userns: 'host' });
    const { out } = await runToMarker('head -n 1 /proc/self/uid_map', hostUserns);
    assert.equal((out[0] ?? '').trim().split(/\s+/)[1], '0');
  });
});
