import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ensureKeyDir } from '@orloj/common/envelope';
import { deleteBusObjects, RoleProcess, needService, createTestDatabase, until, type TestDatabase } from '@orloj/common/test-support';
import { insertUser } from '@orloj/notifier/test-support';
import { insertDueWorkflows } from './support/slow-target.js';
import { probePort, probeUntil } from './support/role-fleet.js';

const SPEED = 10;
const WORKFLOWS = 12;
const REFUSAL = /rejected a bus message that failed its signature check/g;

/**
 * Issue 30: a runner given another installation's keys, beside a good one, on
 * PostgreSQL and RabbitMQ. It refuses the few jobs it takes, then takes itself
 * out: /readyz 503 naming the key, no more jobs taken, and the jobs go to the
 * good runner at once instead of each being refused and handed out again late.
 */
describe('a runner that cannot verify the scheduler takes itself out', function () {
  this.timeout(300_000);
  let db: TestDatabase;
  let amqpUrl: string;
  let dataDir: string;
  let otherDir: string;
  let target: http.Server;
  const prefix = `orloj-wrongkey-${crypto.randomBytes(4).toString('hex')}.`;
  const processes: RoleProcess[] = [];
  let origin: number;

  /** A scheduler or runners process; `keysFrom`: the DATA_DIR whose keys/ it reads (the bad runner's: another installation's). */
  const role = (name: 'scheduler' | 'runners', keysFrom: string, runnerId?: string) => {
    const settings: Record<string, string> = { ORLOJ_CLOCK: `accelerated:${origin}:${SPEED}`, RUNNER_ALLOW_TARGETS: '127.0.0.0/8', DOCKER_HOST: 'unix:///nonexistent.sock' };
    if (runnerId) settings.RUNNER_ID = runnerId;
    const started = name === 'runners' ? /runner started/ : /scheduler started/;
    processes.push(new RoleProcess(name, { databaseUrl: db.url, amqpUrl, busPrefix: prefix, dataDir: keysFrom }, settings, started));
    return processes.at(-1)!;
  };

  before(async function () {
    amqpUrl = needService(this, 'amqp');
    db = await createTestDatabase('postgres', this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-wrongkey-'));
    otherDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-otherkeys-'));
    // Two installations' keys: the bad runner reads the other one's.
    await ensureKeyDir(dataDir);
    await ensureKeyDir(otherDir);
    target = http.createServer((_req, res) => res.end('ok'));
    target.listen(0, '127.0.0.1');
    await new Promise((r) => target.once('listening', r));
    origin = Date.now();
    const userId = await insertUser(db.store);
    await insertDueWorkflows(db.store, userId, `http://127.0.0.1:${(target.address() as AddressInfo).port}/`, origin, WORKFLOWS);
  });

  after(async () => {
    for (const p of processes) await p.stop('SIGKILL');
    target?.close();
    await db?.drop();
    for (const dir of [dataDir, otherDir]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
    if (amqpUrl) await deleteBusObjects(amqpUrl, prefix);
  });

  const completed = async () => Number((await db.store.db.selectFrom('jobs').select((eb) => eb.fn.countAll().as('n')).where('status', '=', 'COMPLETED').executeTakeFirstOrThrow()).n);

  it('reports not ready naming the key, consumes no more jobs, and the good runner runs them', async () => {
    // The bad runner first, so it is the one taking the first jobs.
    const bad = role('runners', otherDir, 'runner-wrong-key');
    await bad.start();
    await role('scheduler', dataDir).start();
    const good = role('runners', dataDir, 'runner-good');
    await good.start();

    const ready = await probeUntil(probePort(bad), '/readyz', (p) => p.status === 503 && /ORLOJ_SCHEDULER_PUBLIC_KEY/.test(p.body), 'the wrong-key runner reports its key problem', 120_000);
    assert.match(ready.body, /signature check/);
    const refusedAtWithdrawal = (bad.output.match(REFUSAL) ?? []).length;
    assert.ok(refusedAtWithdrawal >= 3, bad.output.slice(-3000));
    assert.equal((await probeUntil(probePort(good), '/readyz', (p) => p.status === 200, 'the good runner is ready')).status, 200);

    // Two more rounds of every workflow's slots (a clock minute is 6 s here), all run by the good runner.
    const base = await completed();
    await until(completed, (n) => n >= base + 2 * WORKFLOWS, 'two more rounds of jobs completed by the good runner', 120_000, { everyMs: 200 }).catch((err: Error) => {
      throw new Error(`${err.message}\n${good.output.slice(-3000)}`);
    });
    assert.equal((bad.output.match(REFUSAL) ?? []).length, refusedAtWithdrawal, 'the wrong-key runner took more jobs after taking itself out');
    assert.doesNotMatch(bad.output, /"msg":"[^"]*job (started|finished)/);
  });
});
