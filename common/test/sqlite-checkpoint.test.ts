import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { openDatabase, type DatabaseHandle } from '../src/store/database.js';
import { logCheckpointTrouble, WRITER_CHECKPOINT_PAGES, type CheckpointMessage, type CheckpointResult } from '../src/store/sqlite-checkpoint.js';
import { recordingLogger } from './support/logger.js';
import type { Worker } from 'node:worker_threads';
import { tempDir, within } from './support/index.js';

/** Resolves with the checkpointer's first result for which `ok` holds. */
function checkpoint(database: DatabaseHandle, ok: (r: CheckpointResult) => boolean, what: string): Promise<CheckpointResult> {
  return within(
    new Promise<CheckpointResult>((resolve, reject) => {
      const stop = database.checkpointer!.onMessage((m: CheckpointMessage) => {
        if ('error' in m) reject(new Error(`the checkpoint thread failed: ${m.error}`));
        else if (ok(m.result)) resolve(m.result);
        else return;
        stop();
      });
    }),
    what,
  );
}

describe('SQLite WAL checkpoints on their own thread (docs/adr/0025)', () => {
  const dir = tempDir('orloj-checkpoint-');
  let database: DatabaseHandle;
  let file: string;

  beforeEach(async () => {
    file = path.join(dir(), `${Math.random().toString(36).slice(2)}.db`);
    database = openDatabase(`sqlite:${file}`);
    await database.migrate();
    await sql`create table scratch (id integer primary key, body blob not null)`.execute(database.db);
  });
  afterEach(() => database.close());

  /** About `pages` WAL frames: rows of 3,000 bytes, a page each, in commits of 100. */
  async function write(pages: number): Promise<void> {
    for (let done = 0; done < pages; done += 100) {
      await database.db.transaction().execute(async (tx) => {
        for (let i = 0; i < 100; i++) await sql`insert into scratch (body) values (${Buffer.alloc(3000, i)})`.execute(tx);
      });
    }
  }

  it('leaves the writer its own checkpoint only past WRITER_CHECKPOINT_PAGES', async () => {
    const { rows } = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(database.db);
    assert.equal(rows[0]!.wal_autocheckpoint, WRITER_CHECKPOINT_PAGES);
  });

  it('copies a busy WAL into the database file, which the writer then starts over: the WAL stays the size of one round', async () => {
    const round = 1_500; // past START_AT_BYTES, and past SQLite's default of 1,000 pages where the writer would have checkpointed inline
    for (let r = 0; r < 3; r++) {
      const caughtUp = checkpoint(database, (c) => c.log >= round && c.checkpointed === c.log, `round ${r}'s pages checkpointed`);
      await write(round);
      await caughtUp;
    }
    // Three rounds written into one WAL would be 4,500 pages: each round started it over instead.
    const walPages = fs.statSync(`${file}-wal`).size / 4096;
    assert.ok(walPages < 2 * round, `the WAL holds ${Math.round(walPages)} pages`);
    const { rows } = await sql<{ n: number }>`select count(*) as n from scratch`.execute(database.db);
    assert.equal(Number(rows[0]!.n), 3 * round);
  });

  it('tells its listeners when the thread stops, and the server\'s log hears it', async () => {
    // The thread starts once the WAL passes START_AT_BYTES; its first result says it runs.
    await Promise.all([checkpoint(database, () => true, 'the first round'), write(400)]);
    const heard: CheckpointMessage[] = [];
    const stopHearing = database.checkpointer!.onMessage((m) => heard.push(m));
    const { logger, lines } = recordingLogger();
    logCheckpointTrouble(database.checkpointer!, logger);
    // A thread that goes away (terminated from outside: what a crash of the thread looks like to the parent).
    const stopped = new Promise<void>((resolve) => database.checkpointer!.onMessage((m) => 'error' in m && resolve()));
    await (database.checkpointer as unknown as { worker: Worker }).worker.terminate();
    await stopped;
    stopHearing();
    assert.deepEqual(heard.filter((m) => 'error' in m), [{ error: 'the checkpoint thread stopped (exit code 1)' }]);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.level, 40);
    assert.deepEqual([lines[0]!.err, lines[0]!.failures, lines[0]!.fallback_pages], ['the checkpoint thread stopped (exit code 1)', 1, WRITER_CHECKPOINT_PAGES]);
  });

  it('logs a thread failing at every round once per interval, with how many failed since', () => {
    const listeners: ((m: CheckpointMessage) => void)[] = [];
    const { logger, lines } = recordingLogger();
    let now = 1_000;
    logCheckpointTrouble({ onMessage: (l) => (listeners.push(l), () => undefined) }, logger, () => now, 60_000);
    const fail = () => listeners.forEach((l) => l({ error: 'database is locked' }));
    fail();
    for (let i = 0; i < 239; i++) {
      now += 250;
      fail();
      listeners.forEach((l) => l({ result: { busy: 0, log: 10, checkpointed: 10 } }));
    }
    now += 250;
    fail();
    assert.deepEqual(lines.map((l) => l.failures), [1, 240], 'the first, then one line after a minute counting the 240 since');
  });

  it('is not there for an in-memory database, which has no WAL', async () => {
    const memory = openDatabase('sqlite::memory:');
    try {
      assert.equal(memory.checkpointer, undefined);
    } finally {
      await memory.close();
    }
  });
});
