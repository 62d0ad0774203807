import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import Docker from 'dockerode';
import { qualifiedImageRef, reasons } from '@orloj/common/domain';
import type { ContainerLimits } from '@orloj/common/config';
import { tcpCanary, type Canary, needService } from '@orloj/common/test-support';
import { ContainerExecutor, ImagePolicy, type Resolver } from '../src/index.js';
import { dockerOptionsFromHost, imageCarriesName } from '../src/executors/container.executor.js';
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

describe('image references in full', () => {
  it('spells out registry, library/ and :latest the way Docker reads a reference', () => {
    assert.equal(qualifiedImageRef('alpine'), 'docker.io/library/alpine:latest');
    assert.equal(qualifiedImageRef('alpine:3'), 'docker.io/library/alpine:3');
    assert.equal(qualifiedImageRef('team/app:1'), 'docker.io/team/app:1');
    assert.equal(qualifiedImageRef('docker.io/alpine'), 'docker.io/library/alpine:latest');
    assert.equal(qualifiedImageRef('index.docker.io/team/app'), 'docker.io/team/app:latest');
    assert.equal(qualifiedImageRef('Registry.Example.com:5000/team/app'), 'registry.example.com:5000/team/app:latest');
    assert.equal(qualifiedImageRef('localhost/orloj-test/busybox:1'), 'localhost/orloj-test/busybox:1');
    assert.equal(qualifiedImageRef('app@sha256:abcd'), 'docker.io/library/app@sha256:abcd');
    assert.equal(qualifiedImageRef('localhost:5000/app:2@sha256:abcd'), 'localhost:5000/app:2@sha256:abcd');
    assert.equal(qualifiedImageRef('9578d416'), 'docker.io/library/9578d416:latest');
  });

  it('accepts an inspected image only when it carries the asked name (Docker lists Hub names short)', () => {
    const hub = { RepoTags: ['alpine:3'], RepoDigests: ['alpine@sha256:abcd'] };
    assert.equal(imageCarriesName(hub, 'docker.io/library/alpine:3'), true);
    assert.equal(imageCarriesName(hub, 'docker.io/library/alpine@sha256:abcd'), true);
    assert.equal(imageCarriesName(hub, 'docker.io/library/alpine:3@sha256:abcd'), true);
    assert.equal(imageCarriesName(hub, 'docker.io/library/alpine:4'), false);
    assert.equal(imageCarriesName(hub, 'docker.io/team/alpine@sha256:abcd'), false, 'the digest under another name');
    const local = { RepoTags: ['localhost/orloj-test/busybox:1'], RepoDigests: ['localhost/orloj-test/busybox@sha256:abcd'] };
    assert.equal(imageCarriesName(local, 'docker.io/orloj-test/busybox:1'), false);
    assert.equal(imageCarriesName(local, 'localhost/orloj-test/busybox:1'), true);
    assert.equal(imageCarriesName({ RepoTags: [], RepoDigests: [] }, 'docker.io/library/alpine:3'), false);
  });

  it('refuses image ids before anything else', () => {
    const policy = new ImagePolicy({ limits: limits(['docker.io', 'localhost']) });
    const id = 'a'.repeat(64);
    assert.deepEqual(policy.decide(`sha256:${id}`), { ok: false, reason: reasons.imageIdNotAllowed() });
    assert.deepEqual(policy.decide(id), { ok: false, reason: reasons.imageIdNotAllowed() });
    assert.deepEqual(policy.decide('sha256:aaaa'), { ok: false, reason: reasons.imageIdNotAllowed() });
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

  /**
   * Issue 29, item 5: with the default CONTAINER_REGISTRIES=docker.io, every
   * spelling that finds the locally built test image (it exists only as
   * localhost/orloj-test/busybox:1) is refused, by ensure and by run alike.
   */
  it('refuses every spelling of a local-only image under the default allow-list: short names, ids, digests under any name', async function () {
    const docker = new Docker(dockerOptionsFromHost(needService(this, 'docker')));
    const local = await docker.getImage(IMAGE).inspect();
    const id = local.Id.replace(/^sha256:/, '');
    const digest = (local.RepoDigests ?? [])[0]?.split('@')[1];
    assert.ok(digest, `${IMAGE} has no digest`);
    const spellings = [
      'orloj-test/busybox:1',
      'busybox:1',
      `sha256:${id}`,
      id,
      id.slice(0, 12),
      id.slice(0, 8),
      `orloj-test/busybox@${digest}`,
      `docker.io/anyone/anything@${digest}`,
      `anything@${digest}`,
      `docker.io/orloj-test/busybox:1@${digest}`,
    ];
    const policy = new ImagePolicy({ limits: limits(['docker.io']) });
    for (const image of spellings) {
      const result = await ensure(policy, image);
      assert.equal(result.ok, false, `${image} was accepted`);
      const run = await executor.run({ jobId: `spelling-${runId}`, image, cmd: ['true'], env: {}, timeoutMs: 30_000, network: 'none' }, { onLine: () => undefined });
      assert.ok(run.status === 'FAILED' && run.reason.code === 'IMAGE_PULL_FAILED', `${image} ran: ${JSON.stringify(run)}`);
    }
    // The same image under its own name, once localhost is allowed.
    const allowing = new ImagePolicy({ limits: limits(['docker.io', 'localhost']) });
    assert.deepEqual(await ensure(allowing, IMAGE), { ok: true });
    assert.deepEqual(await ensure(allowing, `localhost/orloj-test/busybox@${digest}`), { ok: true });
  });

  it('uses localhost/ images only when present, never pulling them', async () => {
    const policy = new ImagePolicy({ limits: limits(['localhost']) });
    assert.deepEqual(await ensure(policy, IMAGE), { ok: true });
    assert.deepEqual(await ensure(policy, `localhost/orloj-test/missing-${runId}:1`), { ok: false, reason: reasons.localImageMissing() });
  });
});
