import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { reasons } from '@orloj/common/domain';
import type { ContainerLimits } from '@orloj/common/config';
import { tcpCanary, type Canary, needService } from '@orloj/common/test-support';
import { ContainerExecutor, ImagePolicy, type Resolver } from '../src/index.js';
import { LogCap } from '../src/log-cap.js';

/**
 * Issue 14, finding 2: an image reference must not make the container runtime
 * connect where the address guard forbids (SSRF). Checked against the real
 * runtime, with a loopback "registry" that counts the connections it gets.
 */
const logger = pino({ level: 'silent' });
const IMAGE = 'localhost/orloj-test/busybox:1';

const limits = (registries: string[]): ContainerLimits => ({
  registries,
  networkEnabled: false,
  maxMemoryMb: 1024,
  maxCpus: 1,
  maxTimeoutMs: 30 * 60_000,
  maxLogLines: 1000,
  maxLogBytes: 1 << 20,
});

describe('ImagePolicy', () => {
  it('refuses registries outside the allow-list, whatever is present locally', () => {
    const policy = new ImagePolicy({ limits: limits(['docker.io']) });
    assert.deepEqual(policy.decide('ghcr.io/team/app:1'), { ok: false, reason: reasons.registryNotAllowed() });
    assert.deepEqual(policy.decide(IMAGE), { ok: false, reason: reasons.registryNotAllowed() });
    assert.equal(policy.decide('alpine:3').ok, true);
    assert.equal(policy.decide('docker.io/library/alpine:3').ok, true);
  });

  it('refuses to start when CONTAINER_REGISTRIES names an address the guard refuses', () => {
    for (const entry of ['127.0.0.1:5000', 'localhost:5000', '169.254.169.254', '[::1]:5000']) {
      assert.throws(() => new ImagePolicy({ limits: limits([entry]) }), /CONTAINER_REGISTRIES names .*RUNNER_ALLOW_TARGETS/, entry);
    }
    assert.throws(() => new ImagePolicy({ limits: limits(['10.1.2.3:5000']), denyTargets: ['10.0.0.0/8'] }), /CONTAINER_REGISTRIES/);
    // explicitly re-allowed by the operator
    new ImagePolicy({ limits: limits(['127.0.0.1:5000', 'localhost:5000']), allowTargets: ['127.0.0.0/8', '::1/128'] });
    new ImagePolicy({ limits: limits(['localhost', 'docker.io']) });
  });

  it('caps resources at the maxima and refuses a network that is not enabled', () => {
    const policy = new ImagePolicy({ limits: limits(['docker.io']) });
    const payload = { image: 'alpine:3', env: {}, timeout: 3_600_000, network: 'bridge' as const, memory_mb: 4096, cpus: 8 };
    assert.deepEqual(policy.refuseRun(payload), reasons.networkNotAllowed());
    assert.equal(policy.refuseRun({ ...payload, network: 'none' }), undefined);
    assert.deepEqual(policy.resources(payload, 512), { memoryMb: 1024, cpus: 1, timeoutMs: 30 * 60_000 });
    assert.deepEqual(policy.resources({ ...payload, memory_mb: undefined, cpus: undefined }, 512), { memoryMb: 512, cpus: 1, timeoutMs: 30 * 60_000 });
  });
});

describe('LogCap', () => {
  it('keeps maxLines lines, then one marker, then drops while counting', () => {
    const cap = new LogCap(3, 1 << 20);
    const verdicts = Array.from({ length: 6 }, (_, i) => cap.admit(`line ${i}`));
    assert.deepEqual(verdicts, ['keep', 'keep', 'keep', 'marker', 'drop', 'drop']);
    assert.equal(cap.truncated, true);
    assert.equal(cap.printed, 6);
    assert.match(cap.marker(), /^\[orloj\] log limit reached \(3 lines or 1 MiB per job\)/);
  });

  it('counts UTF-8 bytes: the line that would pass the byte cap becomes the marker', () => {
    const cap = new LogCap(1000, 10);
    assert.equal(cap.admit('ééééé'), 'keep'); // 10 bytes
    assert.equal(cap.admit(''), 'keep');
    assert.equal(cap.admit('x'), 'marker');
    assert.equal(cap.admit('x'), 'drop');
  });

  it('never marks a log within the cap', () => {
    const cap = new LogCap(2, 100);
    assert.deepEqual([cap.admit('a'), cap.admit('b')], ['keep', 'keep']);
    assert.equal(cap.truncated, false);
  });
});

describe('ImagePolicy with a real container runtime', function () {
  this.timeout(120_000);
  let executor: ContainerExecutor;
  let registry: Canary;
  const runId = randomBytes(6).toString('hex');

  before(async function () {
    const host = needService(this, 'docker');
    executor = new ContainerExecutor({ dockerHost: host, logger, pullTimeoutMs: 60_000 });
    registry = await tcpCanary();
  });
  after(async () => registry?.close());

  const ensure = (policy: ImagePolicy, image: string) => {
    const decision = policy.decide(image);
    return decision.ok ? executor.ensureImage(image, { beforePull: decision.beforePull }) : Promise.resolve(decision);
  };

  it('never lets the runtime connect to a registry whose name resolves to loopback (DNS can change after validation)', async () => {
    const host = `registry-${runId}.orloj.test:${registry.port}`;
    // The name passed validation (it is allow-listed); now it resolves to loopback.
    const resolver: Resolver = () => Promise.resolve([{ address: '127.0.0.1', family: 4 }]);
    const policy = new ImagePolicy({ limits: limits([host]), resolver });
    const before = registry.connections();
    assert.deepEqual(await ensure(policy, `${host}/probe/x:1`), { ok: false, reason: reasons.registryAddressNotAllowed() });
    assert.equal(registry.connections(), before, 'the runtime connected to the loopback registry');
    // A name that does not resolve is not handed to the runtime either (fail closed).
    const unresolvable = new ImagePolicy({ limits: limits([host]), resolver: () => Promise.reject(new Error('ENOTFOUND')) });
    assert.deepEqual(await ensure(unresolvable, `${host}/probe/x:1`), { ok: false, reason: reasons.imagePullFailed() });
  });

  it('pulls from a loopback registry only when the operator re-allowed loopback (the canary sees the runtime then)', async () => {
    const host = `127.0.0.1:${registry.port}`;
    const policy = new ImagePolicy({ limits: limits([host]), allowTargets: ['127.0.0.0/8'] });
    const before = registry.connections();
    assert.deepEqual(await ensure(policy, `${host}/probe/x-${runId}:1`), { ok: false, reason: reasons.imagePullFailed() });
    assert.ok(registry.connections() > before, 'the positive control saw no connection: the canary proves nothing');
  });

  it('uses localhost/ images only when present, never pulling them', async () => {
    const policy = new ImagePolicy({ limits: limits(['localhost']) });
    assert.deepEqual(await ensure(policy, IMAGE), { ok: true });
    assert.deepEqual(await ensure(policy, `localhost/orloj-test/missing-${runId}:1`), { ok: false, reason: reasons.localImageMissing() });
  });
});
