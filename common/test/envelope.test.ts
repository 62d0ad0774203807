import assert from 'node:assert/strict';
import crypto, { type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import { recordingLogger } from './support/logger.js';
import os from 'node:os';
import path from 'node:path';
import { MemoryBus, type Bus, type Delivery } from '../src/bus/index.js';
import { canonicalJson } from '../src/core/canonical-json.js';
import { ManualClock } from '../src/core/clock.js';
import { ConfigError } from '../src/config/config.js';
import {
  EnvelopeSigner,
  EnvelopeVerifier,
  ensureKeyDir,
  loadKeysFromEnv,
  PRODUCER_ROLES,
  SignedBus,
  type Envelope,
  type ProducerPolicy,
  type ProducerRole,
  type RejectionReason,
  type UntypedMessages,
} from '../src/envelope/index.js';
import { RequestContext, silentLogger } from '../src/logging/logger.js';
import { MESSAGE_TYPES, QUEUES, type JobRunMessage } from '../src/messages/index.js';
import { OrlojMetrics } from '../src/observability/metrics.js';
import { roleBus } from '../src/envelope/role-bus.js';
import { Inbox } from './support/async.js';

const pairs = Object.fromEntries(PRODUCER_ROLES.map((role) => [role, crypto.generateKeyPairSync('ed25519')])) as Record<
  ProducerRole,
  { privateKey: KeyObject; publicKey: KeyObject }
>;
const publicKeys = Object.fromEntries(PRODUCER_ROLES.map((role) => [role, pairs[role].publicKey]));
const policy: ProducerPolicy = {
  'workflow.terminate': ['api'],
  'job.status': ['runners', 'scheduler'],
};
const TTL = 60_000;

/** What a consumer receives: the envelope after a trip over the wire. */
function wire<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function rejections(verifier: EnvelopeVerifier): Partial<Record<RejectionReason, number>> {
  return Object.fromEntries(Object.entries(verifier.rejected).filter(([, n]) => n > 0));
}

describe('envelope', () => {
  let clock: ManualClock;
  let verifier: EnvelopeVerifier;
  const signer = (role: ProducerRole): EnvelopeSigner => new EnvelopeSigner({ role, privateKey: pairs[role].privateKey, clock, ttlMs: TTL });

  beforeEach(() => {
    clock = new ManualClock();
    verifier = new EnvelopeVerifier({ publicKeys, policy, clock });
  });

  it('accepts an envelope after a JSON round trip, with every field intact', () => {
    const sealed = signer('api').seal('workflow.terminate', { workflowId: 'w1', reason: null }, { subject: 'user-1' });
    assert.match(sealed.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    assert.equal(sealed.producer, 'api');
    assert.equal(sealed.issued_at, clock.now());
    assert.equal(sealed.expires_at, clock.now() + TTL);
    const result = verifier.verify(wire(sealed));
    assert.ok(result.ok);
    assert.deepEqual(result.envelope, sealed);
    assert.deepEqual(rejections(verifier), {});
  });

  it('accepts an envelope whose keys arrive in another order', () => {
    const sealed = signer('api').seal('workflow.terminate', { a: 1, nested: { y: 2, x: [{ q: 1, p: 2 }] } });
    const { body: _body, ...rest } = sealed;
    const reordered = Object.fromEntries(Object.entries({ ...rest, body: { nested: { x: [{ p: 2, q: 1 }], y: 2 }, a: 1 } }).reverse());
    assert.notEqual(JSON.stringify(reordered), JSON.stringify(sealed));
    assert.ok(verifier.verify(wire(reordered)).ok);
  });

  it('rejects an envelope signed by a role that may not produce its type', () => {
    const forged = signer('runners').seal('workflow.terminate', { workflowId: 'w1' }, { subject: 'user-1' });
    const result = verifier.verify(wire(forged));
    assert.equal(result.ok, false);
    assert.equal(!result.ok && result.reason, 'wrong_producer');
    assert.equal(verifier.verify(wire(signer('api').seal('no.such.type', {}))).ok, false);
    assert.deepEqual(rejections(verifier), { wrong_producer: 2 });
  });

  it('rejects an envelope whose body was altered after signing', () => {
    const sealed = wire(signer('runners').seal('job.status', { jobId: 'j1', status: 'FAILED' }));
    const result = verifier.verify({ ...sealed, body: { jobId: 'j1', status: 'COMPLETED' } });
    assert.equal(!result.ok && result.reason, 'bad_signature');
    assert.deepEqual(rejections(verifier), { bad_signature: 1 });
  });

  it('rejects an envelope whose producer or subject was altered after signing', () => {
    const sealed = wire(signer('runners').seal('job.status', { jobId: 'j1' }, { subject: 'user-1' }));
    assert.equal(verifier.verify({ ...sealed, producer: 'scheduler' }).ok, false);
    assert.equal(verifier.verify({ ...sealed, subject: 'user-2' }).ok, false);
    assert.deepEqual(rejections(verifier), { bad_signature: 2 });
  });

  it('rejects an envelope once it expired, and one issued too far in the future', () => {
    const sealed = wire(signer('api').seal('workflow.terminate', {}));
    clock.advance(TTL - 1);
    assert.ok(verifier.verify(sealed, { remember: false }).ok);
    clock.advance(1);
    const result = verifier.verify(sealed);
    assert.equal(!result.ok && result.reason, 'expired');
    clock.set(sealed.issued_at - 60_000);
    assert.equal(verifier.verify(sealed).ok, false);
    assert.deepEqual(rejections(verifier), { expired: 2 });
  });

  it('rejects a replayed envelope within its validity window, per scope', () => {
    const sealed = wire(signer('api').seal('workflow.terminate', {}));
    assert.ok(verifier.verify(sealed, { scope: 'queue:a' }).ok);
    const again = verifier.verify(sealed, { scope: 'queue:a' });
    assert.equal(!again.ok && again.reason, 'replayed');
    assert.ok(verifier.verify(sealed, { scope: 'queue:b' }).ok, 'another queue may get the same envelope');
    clock.advance(TTL);
    const late = verifier.verify(sealed, { scope: 'queue:a' });
    assert.equal(!late.ok && late.reason, 'expired', 'after expiry the id is forgotten; expiry rejects it');
    assert.deepEqual(rejections(verifier), { replayed: 1, expired: 1 });
  });

  it('remembers at most maxSeen ids', () => {
    const small = new EnvelopeVerifier({ publicKeys, policy, clock, maxSeen: 2 });
    const [first, second, third] = [1, 2, 3].map((n) => wire(signer('api').seal('workflow.terminate', { n })));
    for (const e of [first, second, third]) assert.ok(small.verify(e).ok);
    assert.ok(small.verify(first).ok, 'the oldest id was evicted');
    assert.equal(small.verify(third).ok, false);
  });

  it('keeps evicting the oldest and forgetting the expired across thousands of ids', () => {
    const small = new EnvelopeVerifier({ publicKeys, policy, clock, maxSeen: 100 });
    const api = signer('api');
    const sealed = Array.from({ length: 3_000 }, (_, n) => wire(api.seal('workflow.terminate', { n })));
    for (const e of sealed) assert.ok(small.verify(e).ok);
    for (const e of sealed.slice(-100)) assert.equal(small.verify(e).ok, false, 'the newest 100 are remembered');
    assert.ok(small.verify(sealed[2_899]!).ok, 'older ones were evicted');
    clock.advance(TTL);
    const fresh = Array.from({ length: 2_000 }, (_, n) => wire(api.seal('workflow.terminate', { fresh: n })));
    for (const e of fresh) assert.ok(small.verify(e).ok);
    assert.equal(small.verify(fresh[1_999]!).ok, false);
  });

  it('rejects unsigned messages', () => {
    const sealed = wire(signer('api').seal('workflow.terminate', {}));
    const { sig: _sig, ...unsigned } = sealed;
    for (const message of [unsigned, { ...sealed, sig: '' }, 'hello', null, [sealed]]) {
      const result = verifier.verify(message);
      assert.equal(!result.ok && result.reason, 'unsigned');
    }
    assert.deepEqual(rejections(verifier), { unsigned: 5 });
  });

  it('carries a request id signed with the rest, and still accepts envelopes without one', () => {
    const traced = wire(signer('api').seal('workflow.terminate', {}, { reqId: 'edge-7f3a' }));
    assert.equal(traced.req_id, 'edge-7f3a');
    const result = verifier.verify(traced);
    assert.ok(result.ok);
    assert.equal(result.envelope.req_id, 'edge-7f3a');
    const untraced = wire(signer('api').seal('workflow.terminate', {}));
    assert.equal('req_id' in untraced, false);
    assert.equal(verifier.verify(untraced).ok, true);
    // Changed on the way: the signature no longer matches; not a request id: refused as malformed.
    assert.equal(verifier.verify({ ...wire(signer('api').seal('workflow.terminate', {}, { reqId: 'a' })), req_id: 'b' }).ok, false);
    assert.equal(verifier.verify({ ...wire(signer('api').seal('workflow.terminate', {})), req_id: 'has space' }).ok, false);
    assert.deepEqual(rejections(verifier), { bad_signature: 2 });
    assert.throws(() => signer('api').seal('workflow.terminate', {}, { reqId: 'has space' }), /request id/);
  });

  it('rejects malformed envelopes and garbage signatures as bad signatures', () => {
    const sealed = wire(signer('api').seal('workflow.terminate', {}));
    const cases: unknown[] = [
      { ...sealed, extra: true },
      { ...sealed, sig: 'not-a-signature' },
      { ...sealed, sig: sealed.sig.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')) },
      { ...sealed, producer: 'intruder' },
      { ...sealed, issued_at: String(sealed.issued_at) },
    ];
    for (const message of cases) assert.equal(verifier.verify(message).ok, false);
    const noKey = new EnvelopeVerifier({ publicKeys: { runners: pairs.runners.publicKey }, policy, clock });
    assert.equal(noKey.verify(sealed).ok, false);
    assert.deepEqual(rejections(verifier), { bad_signature: 5 });
    assert.deepEqual(rejections(noKey), { bad_signature: 1 });
  });

  it('reports what a rejected message claims to be, leaving out claims that are not strings', () => {
    const sealed = wire(signer('api').seal('workflow.terminate', {}));
    const { sig: _sig, ...unsigned } = sealed;
    const cases: [unknown, object][] = [
      [unsigned, { id: sealed.id, type: 'workflow.terminate', producer: 'api' }],
      [{ ...sealed, extra: true }, { id: sealed.id, type: 'workflow.terminate', producer: 'api' }],
      [{ ...sealed, type: 7, producer: 'intruder' }, { id: sealed.id, producer: 'intruder' }],
      [wire(signer('runners').seal('workflow.terminate', {})), { type: 'workflow.terminate', producer: 'runners' }],
      ['hello', {}],
    ];
    for (const [message, claimed] of cases) {
      const result = verifier.verify(message);
      assert.ok(!result.ok);
      const { id: _id, ...rest } = result.claimed;
      assert.deepEqual('id' in claimed ? result.claimed : rest, claimed);
    }
  });

  it('refuses to seal a body that JSON cannot carry', () => {
    assert.throws(() => signer('api').seal('workflow.terminate', { at: new Date() }), /plain objects/);
    assert.throws(() => signer('api').seal('workflow.terminate', undefined), /body/);
    assert.throws(() => signer('api').seal('workflow.terminate', { column: [1, Number.NaN] }), /cannot be signed/);
    assert.throws(() => signer('api').seal('workflow.terminate', { column: ['a', undefined] }), /cannot be signed/);
  });

  it('signs a column of plain values as the same canonical text as any other array', () => {
    const columns = { messages: ['a "quoted" line', 'ünïcode \u2028', ''], timestamps: [1, 2.5, -3], flags: [true, null] };
    const mixed = { nested: [{ b: 1, a: 2 }, 'x', [3, 'y']] };
    const items = (values: unknown[]) => `[${values.map((v) => JSON.stringify(v)).join(',')}]`;
    assert.equal(canonicalJson(columns), `{"flags":${items(columns.flags)},"messages":${items(columns.messages)},"timestamps":${items(columns.timestamps)}}`);
    assert.equal(canonicalJson(mixed), '{"nested":[{"a":2,"b":1},"x",[3,"y"]]}');
    const sealed = wire(signer('api').seal('workflow.terminate', columns));
    assert.ok(verifier.verify(sealed).ok);
  });
});

describe('SignedBus', () => {
  let bus: Bus;
  let clock: ManualClock;
  let verifier: EnvelopeVerifier;
  let api: SignedBus<UntypedMessages>;

  beforeEach(() => {
    bus = new MemoryBus({ logger: silentLogger, prefix: 'test.' });
    clock = new ManualClock();
    verifier = new EnvelopeVerifier({ publicKeys, policy, clock });
    api = new SignedBus<UntypedMessages>({
      bus,
      verifier,
      logger: silentLogger,
      signer: new EnvelopeSigner({ role: 'api', privateKey: pairs.api.privateKey, clock }),
    });
  });

  afterEach(() => bus.close());

  it('hands verified envelopes to the handler and acks forged ones away without redelivery', async () => {
    const received = new Inbox<Envelope>();
    await api.consume('commands', (envelope) => received.push(envelope));
    await bus.publish('commands', { type: 'workflow.terminate', body: {} });
    const sent = await api.publish('commands', 'workflow.terminate', { workflowId: 'w1' }, { subject: 'user-1' });
    assert.deepEqual(await received.next(), sent);
    // prefetch 1 and redelivery to the head: a nacked forgery would have been counted again before this
    assert.deepEqual(rejections(verifier), { unsigned: 1 });
  });

  it('lets a redelivery after a failed handler through, and drops a later replay', async () => {
    const attempts = new Inbox<Delivery>();
    await api.consume('commands', (_envelope, delivery) => {
      attempts.push(delivery);
      if (delivery.deliveryCount === 1) throw new Error('transient');
    });
    const sent = await api.publish('commands', 'workflow.terminate', {});
    assert.deepEqual(
      (await attempts.take(2)).map((d) => d.deliveryCount),
      [1, 2],
    );
    await bus.publish('commands', sent);
    await bus.publish('commands', sent);
    // prefetch 1, in order: once the marker is handled, both replays were judged
    const marker = await api.publish('commands', 'workflow.terminate', { marker: true });
    assert.equal((await attempts.next()).deliveryCount, 1);
    assert.notEqual(marker.id, sent.id);
    assert.deepEqual(rejections(verifier), { replayed: 2 });
  });

  it('delivers one broadcast to every subscription in a process', async () => {
    const a = new Inbox<Envelope>();
    const b = new Inbox<Envelope>();
    await api.subscribe('events', a.push);
    await api.subscribe('events', b.push);
    const sent = await api.broadcast('events', 'workflow.terminate', { workflowId: 'w1' });
    assert.deepEqual(await a.next(), sent);
    assert.deepEqual(await b.next(), sent);
    assert.deepEqual(rejections(verifier), {});
  });

  it('stamps what is published inside a request with its id, and runs the handler inside that id', async () => {
    const context = new RequestContext();
    const traced = new SignedBus<UntypedMessages>({
      bus,
      verifier,
      logger: silentLogger,
      requestContext: context,
      signer: new EnvelopeSigner({ role: 'api', privateKey: pairs.api.privateKey, clock }),
    });
    const seen = new Inbox<[string | undefined, string | undefined]>();
    await traced.consume('commands', (envelope) => seen.push([envelope.req_id, context.current()]));
    await context.run('req-1', () => traced.publish('commands', 'workflow.terminate', {}));
    await traced.publish('commands', 'workflow.terminate', {});
    assert.deepEqual(await seen.next(), ['req-1', 'req-1']);
    assert.deepEqual(await seen.next(), [undefined, undefined]);
  });

  it('refuses to publish without a signing key', async () => {
    const consumer = new SignedBus<UntypedMessages>({ bus, verifier, logger: silentLogger });
    await assert.rejects(consumer.publish('commands', 'workflow.terminate', {}), /no signing key/);
  });
});

describe('roleBus', () => {
  /** A job.run body; `job_id` tells the messages of a test apart. */
  const jobRun = (job_id: string): JobRunMessage => ({ job_id, workflow_id: 'w', attempt: 1, kind: 'HEARTBEAT', payload: '{}', log_retention: false });
  const keys = { privateKeys: Object.fromEntries(PRODUCER_ROLES.map((r) => [r, pairs[r].privateKey])), publicKeys };
  const clock = new ManualClock();

  it('seals envelopes unsigned on the in-process bus and still enforces the producer policy', async () => {
    const bus = new MemoryBus({ logger: silentLogger, prefix: 'test.' });
    try {
      const scheduler = roleBus({ bus, role: 'scheduler', keys, clock, logger: silentLogger });
      const runners = roleBus({ bus, role: 'runners', keys, clock, logger: silentLogger });
      const received = new Inbox<Envelope>();
      await runners.consume(QUEUES.jobs, (envelope) => received.push(envelope));
      // A job.run may come from the scheduler only: the runners' own is dropped, the scheduler's arrives.
      await runners.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, jobRun('from-runners'));
      const sent = await scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, jobRun('from-scheduler'));
      assert.equal(sent.sig, '-');
      assert.deepEqual(await received.next(), sent);
    } finally {
      await bus.close();
    }
  });

  it('refuses a body its type\'s decoder cannot read, and a type the consumer does not take, before the handler', async () => {
    const bus = new MemoryBus({ logger: silentLogger, prefix: 'test.' });
    try {
      const scheduler = roleBus({ bus, role: 'scheduler', keys, clock, logger: silentLogger });
      const runners = roleBus({ bus, role: 'runners', keys, clock, logger: silentLogger });
      const received = new Inbox<Envelope>();
      const malformed: string[] = [];
      await runners.consume(QUEUES.jobs, (envelope) => received.push(envelope), { accept: [MESSAGE_TYPES.jobRun], onMalformed: (problem) => malformed.push(problem) });
      await scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, { job_id: 'j' } as unknown as JobRunMessage);
      await scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.buildRun, { workflow_id: 'w', build_token: 1, image: 'busybox' });
      const sent = await scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, jobRun('good'));
      assert.deepEqual(await received.next(), sent);
      assert.deepEqual(malformed, ['attempt must be a positive integer', 'build.run messages are not taken here']);
      assert.equal(runners.rejected.malformed, 2);
    } finally {
      await bus.close();
    }
  });

  it('dead-letters what fails the signature check, logging the claimed role at error level and counting it', async () => {
    const memory = new MemoryBus({ logger: silentLogger, prefix: 'test.' });
    const remote: Bus = { publish: (...a) => memory.publish(...a), consume: (...a) => memory.consume(...a), broadcast: (...a) => memory.broadcast(...a), subscribe: (...a) => memory.subscribe(...a), close: () => memory.close() };
    const { logger, lines: logged } = recordingLogger('info');
    try {
      const scheduler = roleBus({ bus: remote, role: 'scheduler', keys, clock, logger: silentLogger });
      // A runner given another installation's scheduler key: it can verify nothing the scheduler sends.
      const wrong = { privateKeys: keys.privateKeys, publicKeys: { ...publicKeys, scheduler: crypto.generateKeyPairSync('ed25519').publicKey } };
      const metrics = new OrlojMetrics({ defaultMetrics: false });
      const runners = roleBus({ bus: remote, role: 'runners', keys: wrong, clock, logger, metrics });
      let handled = 0;
      await runners.consume(QUEUES.jobs, () => void (handled += 1));
      const dead = new Inbox<unknown>();
      await scheduler.consumeDeadLetters(QUEUES.jobs, (message) => dead.push(message));
      const sent = await scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, jobRun('j'));
      assert.deepEqual(await dead.next('the refused job.run'), sent);
      assert.equal(handled, 0);
      const refused = (await metrics.registry.getSingleMetric('orloj_bus_messages_refused_total')?.get())?.values ?? [];
      assert.deepEqual(refused.map((v) => [v.labels.reason, v.value]), [['bad_signature', 1]]);
      const line = logged.find((l) => l.reason === 'bad_signature');
      assert.equal(line?.level, 50, 'error level');
      assert.equal(line?.claimedRole, 'scheduler');
    } finally {
      await memory.close();
    }
  });

  it('signs on any other bus, and a signing bus refuses unsigned envelopes', async () => {
    const memory = new MemoryBus({ logger: silentLogger, prefix: 'test.' });
    const remote: Bus = { publish: (...a) => memory.publish(...a), consume: (...a) => memory.consume(...a), broadcast: (...a) => memory.broadcast(...a), subscribe: (...a) => memory.subscribe(...a), close: () => memory.close() };
    try {
      const scheduler = roleBus({ bus: remote, role: 'scheduler', keys, clock, logger: silentLogger });
      const runners = roleBus({ bus: remote, role: 'runners', keys, clock, logger: silentLogger });
      const unsignedScheduler = roleBus({ bus: memory, role: 'scheduler', keys, clock, logger: silentLogger });
      const received = new Inbox<Envelope>();
      await runners.consume(QUEUES.jobs, (envelope) => received.push(envelope));
      await unsignedScheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, jobRun('unsigned'));
      const sent = await scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, jobRun('signed'));
      assert.match(sent.sig, /^[A-Za-z0-9_-]{86}$/);
      assert.deepEqual(await received.next(), sent);
    } finally {
      await memory.close();
    }
  });
});

describe('keys', () => {
  const dirs: string[] = [];
  const tempDir = (): string => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-keys-'));
    dirs.push(dir);
    return dir;
  };
  const pem = (key: KeyObject | undefined): string => String(key?.export({ type: key.type === 'private' ? 'pkcs8' : 'spki', format: 'pem' }));

  after(() => {
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('generates one key pair per role on first start and reuses it afterwards', async () => {
    const dataDir = tempDir();
    const first = await ensureKeyDir(dataDir);
    const files = fs.readdirSync(path.join(dataDir, 'keys')).sort();
    assert.deepEqual(files, PRODUCER_ROLES.flatMap((role) => [`${role}.key`, `${role}.pub`]).sort());
    for (const role of PRODUCER_ROLES) {
      assert.equal(fs.statSync(path.join(dataDir, 'keys', `${role}.key`)).mode & 0o777, 0o600);
    }
    const second = await ensureKeyDir(dataDir);
    for (const role of PRODUCER_ROLES) {
      assert.equal(pem(second.privateKeys[role]), pem(first.privateKeys[role]));
      assert.equal(pem(second.publicKeys[role]), pem(first.publicKeys[role]));
    }
    const data = Buffer.from('x');
    const sig = crypto.sign(null, data, first.privateKeys.notifier as KeyObject);
    assert.ok(crypto.verify(null, data, second.publicKeys.notifier as KeyObject, sig));
  });

  it('agrees on one key when two processes start at once', async () => {
    const dataDir = tempDir();
    const [a, b] = await Promise.all([ensureKeyDir(dataDir), ensureKeyDir(dataDir)]);
    for (const role of PRODUCER_ROLES) assert.equal(pem(a.privateKeys[role]), pem(b.privateKeys[role]));
    assert.deepEqual(fs.readdirSync(path.join(dataDir, 'keys')).filter((f) => f.endsWith('.tmp')), []);
  });

  it('refuses a public key file that does not match its private key', async () => {
    const dataDir = tempDir();
    await ensureKeyDir(dataDir);
    fs.writeFileSync(path.join(dataDir, 'keys', 'api.pub'), pem(pairs.api.publicKey));
    await assert.rejects(ensureKeyDir(dataDir), (err) => err instanceof ConfigError && /api\.pub does not match/.test(err.message));
  });

  it('loads keys from PEM variables and _FILE variables, deriving a role’s own public key', () => {
    const dir = tempDir();
    const runnersPub = path.join(dir, 'runners.pub');
    fs.writeFileSync(runnersPub, pem(pairs.runners.publicKey));
    const keys = loadKeysFromEnv({
      ORLOJ_API_PRIVATE_KEY: pem(pairs.api.privateKey).replace(/\n/g, '\\n'),
      ORLOJ_RUNNERS_PUBLIC_KEY_FILE: runnersPub,
      ORLOJ_LOG_INGEST_PUBLIC_KEY: pem(pairs['log-ingest'].publicKey),
    });
    assert.deepEqual(Object.keys(keys.privateKeys), ['api']);
    assert.deepEqual(Object.keys(keys.publicKeys).sort(), ['api', 'log-ingest', 'runners']);
    assert.equal(pem(keys.publicKeys.api), pem(pairs.api.publicKey));
    assert.equal(pem(keys.publicKeys.runners), pem(pairs.runners.publicKey));
  });

  it('reports a variable set both ways, an unreadable file and a key that is not Ed25519', () => {
    const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    assert.throws(
      () =>
        loadKeysFromEnv({
          ORLOJ_API_PRIVATE_KEY: pem(pairs.api.privateKey),
          ORLOJ_API_PRIVATE_KEY_FILE: '/nonexistent',
          ORLOJ_SCHEDULER_PUBLIC_KEY_FILE: '/nonexistent/scheduler.pub',
          ORLOJ_NOTIFIER_PRIVATE_KEY: rsa,
        }),
      (err) =>
        err instanceof ConfigError &&
        err.problems.length === 3 &&
        /either ORLOJ_API_PRIVATE_KEY or ORLOJ_API_PRIVATE_KEY_FILE/.test(err.message) &&
        /ORLOJ_SCHEDULER_PUBLIC_KEY_FILE names a file that cannot be read/.test(err.message) &&
        /ORLOJ_NOTIFIER_PRIVATE_KEY must be an Ed25519 key/.test(err.message),
    );
  });
});
