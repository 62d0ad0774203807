import assert from 'node:assert/strict';
import { attemptEnds, jobAttempts } from '@orloj/common/domain';
import { describeEachEngine } from './support/stores.js';
import { insertLogJob } from './support/fixtures.js';

const GAP = 17_000;

describeEachEngine('store: job attempts and uptime (issue 26)', (db) => {
  const store = () => db().store;

  describe('job attempts', () => {
    it('records an attempt given up once, lists them oldest first, and removes them with their job', async () => {
      const { jobId, workflowId } = await insertLogJob(store(), { job: { status: 'QUEUED', attempts: 3 } });
      const second = { jobId, attempt: 2, runnerId: null, startedAt: null, endedAt: 2_000, end: attemptEnds.notStarted() };
      await store().jobAttempts.recordEnded(second);
      await store().jobAttempts.recordEnded({ jobId, attempt: 1, runnerId: 'runner-a', startedAt: 500, endedAt: 1_000, end: attemptEnds.leaseLost('runner-a') });
      // A replayed retry records nothing new.
      await store().jobAttempts.recordEnded({ ...second, endedAt: 9_999 });
      const given = await store().jobAttempts.ofJob(jobId);
      assert.deepEqual(
        given.map((a) => [a.attempt, a.runnerId, a.startedAt, a.endedAt, a.end.code]),
        [
          [1, 'runner-a', 500, 1_000, 'lease_lost'],
          [2, null, null, 2_000, 'not_started'],
        ],
      );
      // The job page's list: the two given up, then the current one from the job's row.
      const job = (await store().jobs.findById(jobId))!;
      assert.deepEqual(
        jobAttempts(job, given).map((a) => [a.attempt, a.outcome]),
        [
          [1, 'RETRIED'],
          [2, 'RETRIED'],
          [3, 'QUEUED'],
        ],
      );
      await store().db.deleteFrom('workflows').where('id', '=', workflowId).execute();
      assert.deepEqual(await store().jobAttempts.ofJob(jobId), []);
    });
  });

  describe('uptime', () => {
    beforeEach(async () => {
      await store().db.deleteFrom('orloj_uptime').execute();
    });

    it('extends one period while the leader beats within the gap, and tells the gap after a longer silence as downtime', async () => {
      const t0 = 1_000_000;
      assert.deepEqual(await store().uptime.beat(t0, GAP), { upSince: t0 });
      assert.deepEqual(await store().uptime.beat(t0 + 10_000, GAP), { upSince: t0 });
      assert.deepEqual(await store().uptime.beat(t0 + 20_000, GAP), { upSince: t0 });
      // Silent for four minutes: a new period, the gap is downtime.
      const back = t0 + 20_000 + 240_000;
      assert.deepEqual(await store().uptime.beat(back, GAP), { upSince: back, downtime: { from: t0 + 20_000, to: back } });
      // A second leader beating at the same instant (a handover) changes nothing.
      assert.deepEqual(await store().uptime.beat(back, GAP), { upSince: back });
      assert.equal((await store().db.selectFrom('orloj_uptime').selectAll().execute()).length, 2);
    });

    it('lists the downtime that reaches into a range, and none before the first period', async () => {
      // Up [0, 10 s], down until 60 s, up [60 s, 70 s], down until 200 s, up [200 s, 210 s].
      for (const [start, end] of [
        [0, 10_000],
        [60_000, 70_000],
        [200_000, 210_000],
      ] as const) {
        await store().uptime.beat(start, GAP);
        await store().uptime.beat(end, GAP);
      }
      const all = [
        { from: 10_000, to: 60_000 },
        { from: 70_000, to: 200_000 },
      ];
      assert.deepEqual(await store().uptime.downtime(-100_000, 1_000_000), all);
      assert.deepEqual(await store().uptime.downtime(20_000, 30_000), [all[0]]);
      assert.deepEqual(await store().uptime.downtime(65_000, 68_000), []);
      assert.deepEqual(await store().uptime.downtime(65_000, 80_000), [all[1]]);
      assert.deepEqual(await store().uptime.downtime(205_000, 300_000), []);
    });
  });
});
