/**
 * A workflow's schedule (common/src/domain/schedule.ts): cron slots in time
 * zones across real daylight-saving transitions, the jitter offset, and, as
 * properties, that the leader's arithmetic gives each slot at most one job and
 * accounts for every slot it does not run.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { catchUpSkips, CATCH_UP_GRACE_MS, contractInterval, jitterOffsetMs, scheduleOf, type ScheduleFields } from '@orloj/common/domain';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const at = (iso: string) => Date.parse(iso);
const iso = (t: number) => new Date(t).toISOString().replace('.000Z', 'Z');
const ID = '0190a0b0-0000-7000-8000-000000000001';

function fields(over: Partial<ScheduleFields>): ScheduleFields {
  return { buildCompletedAt: at('2026-01-01T00:00:00Z'), intervalMinutes: 1, cron: null, timeZone: 'UTC', jitterOffsetMs: 0, firstRun: 'at_first_slot', ...over };
}
const cron = (expression: string, timeZone: string, built: string) => scheduleOf(fields({ cron: expression, timeZone, buildCompletedAt: at(built) }))!;

describe('workflow schedules', () => {
  it('has no slots until built', () => {
    assert.equal(scheduleOf(fields({ buildCompletedAt: null })), undefined);
  });

  it('keeps interval workflows on build + k × interval', () => {
    const s = scheduleOf(fields({ intervalMinutes: 5 }))!;
    const built = at('2026-01-01T00:00:00Z');
    assert.equal(s.mostRecentSlot(built), built + 5 * MINUTE);
    assert.equal(s.mostRecentSlot(built + 12 * MINUTE), built + 10 * MINUTE);
    assert.equal(s.firstSlotAfter(built + 10 * MINUTE), built + 15 * MINUTE);
    assert.equal(s.countIn(built, built + 16 * MINUTE), 3);
    assert.equal(s.skippedBefore(built + 20 * MINUTE, built + 5 * MINUTE), 3);
    assert.equal(s.skippedBefore(built + 20 * MINUTE, built + 7 * MINUTE), 3, 'off the slots: stands for the slot before it');
  });

  describe('run policy (run-policy.ts)', () => {
    it('first run `now` adds one slot at the build, before the schedule\'s own, unmoved by the jitter', () => {
      const built = at('2026-01-01T00:00:00Z');
      const s = scheduleOf(fields({ intervalMinutes: 5, jitterOffsetMs: jitterOffsetMs(ID, 600), firstRun: 'now' }))!;
      const own = scheduleOf(fields({ intervalMinutes: 5, jitterOffsetMs: jitterOffsetMs(ID, 600) }))!;
      const first = own.firstSlotAfter(built);
      assert.equal(s.firstSlotAfter(built - 1), built);
      assert.equal(s.firstSlotAfter(built), first);
      assert.ok(s.isSlot(built) && !own.isSlot(built));
      assert.equal(s.mostRecentSlot(built), built);
      assert.equal(s.mostRecentSlot(first - 1), built);
      assert.equal(s.mostRecentSlot(first), first);
      assert.deepEqual(s.slotsIn(built, first + 1, 10), [built, first]);
      assert.equal(s.countIn(built - 1, first + 5 * MINUTE + 1), 3);
      assert.equal(s.skippedBefore(first + 5 * MINUTE, built), 2, 'the build\'s slot and the first own one');
    });

    it('first run `now` works for a cron schedule too', () => {
      const built = at('2026-01-01T00:00:10Z');
      const s = scheduleOf(fields({ cron: '0 * * * *', buildCompletedAt: built, firstRun: 'now' }))!;
      assert.deepEqual(s.slotsIn(built - 1, at('2026-01-01T02:00:01Z'), 10).map(iso), ['2026-01-01T00:00:10Z', '2026-01-01T01:00:00Z', '2026-01-01T02:00:00Z']);
    });

    it('catch-up `none` passes over a slot only once it is more than the grace late', () => {
      const slot = at('2026-01-01T00:00:00Z');
      assert.equal(catchUpSkips('none', slot, slot + CATCH_UP_GRACE_MS), false);
      assert.equal(catchUpSkips('none', slot, slot + CATCH_UP_GRACE_MS + 1), true);
      assert.equal(catchUpSkips('latest', slot, slot + 7 * 24 * HOUR), false);
    });
  });

  describe('cron in a time zone, across real transitions', () => {
    it('Australia/Sydney (southern hemisphere): 02:30 daily in October (gap) and April (repeat)', () => {
      const spring = cron('30 2 * * *', 'Australia/Sydney', '2026-10-02T00:00:00Z');
      // 3 Oct 02:30 AEST = 2 Oct 16:30Z; 4 Oct 02:30 does not exist → 03:00 AEDT = 3 Oct 16:00Z; 5 Oct 02:30 AEDT = 4 Oct 15:30Z
      assert.deepEqual(spring.slotsIn(at('2026-10-02T00:00:00Z'), at('2026-10-05T00:00:00Z'), 10).map(iso), [
        '2026-10-02T16:30:00Z',
        '2026-10-03T16:00:00Z',
        '2026-10-04T15:30:00Z',
      ]);
      const autumn = cron('*/30 2 * * *', 'Australia/Sydney', '2026-04-04T00:00:00Z');
      // 5 Apr: 02:00 and 02:30 AEDT run; the repeated 02:00 and 02:30 AEST do not
      assert.deepEqual(autumn.slotsIn(at('2026-04-04T14:00:00Z'), at('2026-04-05T12:00:00Z'), 10).map(iso), ['2026-04-04T15:00:00Z', '2026-04-04T15:30:00Z']);
    });

    it('Australia/Adelaide (half-hour offset, +9:30/+10:30): the gap and the repeat', () => {
      const s = cron('15 2 * * *', 'Australia/Adelaide', '2026-10-02T00:00:00Z');
      // 4 Oct 02:15 does not exist (02:00 → 03:00) → 03:00 ACDT = 3 Oct 16:30Z
      assert.deepEqual(s.slotsIn(at('2026-10-03T00:00:00Z'), at('2026-10-05T00:00:00Z'), 10).map(iso), ['2026-10-03T16:30:00Z', '2026-10-04T15:45:00Z']);
      const back = cron('15 2 * * *', 'Australia/Adelaide', '2026-04-03T00:00:00Z');
      // 5 Apr 02:15 ACDT (first pass) = 4 Apr 15:45Z, once
      assert.deepEqual(back.slotsIn(at('2026-04-04T00:00:00Z'), at('2026-04-06T00:00:00Z'), 10).map(iso), ['2026-04-04T15:45:00Z', '2026-04-05T16:45:00Z']);
    });

    it('Asia/Kolkata (+5:30, no daylight saving) and Europe/Berlin', () => {
      const s = cron('0 9 * * MON-FRI', 'Asia/Kolkata', '2026-03-27T00:00:00Z');
      assert.deepEqual(s.slotsIn(at('2026-03-27T00:00:00Z'), at('2026-03-31T00:00:00Z'), 10).map(iso), ['2026-03-27T03:30:00Z', '2026-03-30T03:30:00Z']);
      const berlin = cron('30 2 * * *', 'Europe/Berlin', '2026-03-28T00:00:00Z');
      assert.equal(iso(berlin.mostRecentSlot(at('2026-03-29T12:00:00Z'))), '2026-03-29T01:00:00Z');
      assert.equal(iso(berlin.firstSlotAfter(at('2026-03-29T01:00:00Z'))), '2026-03-30T00:30:00Z');
    });

    it('mostRecentSlot is the first slot before any has come, and never a slot before the build', () => {
      const s = cron('0 * * * *', 'UTC', '2026-01-01T00:10:00Z');
      assert.equal(iso(s.mostRecentSlot(at('2026-01-01T00:20:00Z'))), '2026-01-01T01:00:00Z');
      assert.equal(iso(s.mostRecentSlot(at('2026-01-03T07:59:00Z'))), '2026-01-03T07:00:00Z');
      assert.equal(iso(s.firstSlotAfter(at('2025-12-01T00:00:00Z'))), '2026-01-01T01:00:00Z');
    });

    it("a cron workflow's interval: its longest gap, clamped to the contract's range", () => {
      const now = at('2026-12-01T00:00:00Z');
      assert.equal(contractInterval(null, 'UTC', 7, now), 7);
      assert.equal(contractInterval('*/5 * * * *', 'UTC', 7, now), 5);
      assert.equal(contractInterval('30 2 * * *', 'Asia/Kolkata', 7, now), 1440);
      assert.equal(contractInterval('30 2 * * *', 'Australia/Adelaide', 7, now), 1500, 'the day the clock falls back is 25 hours');
      assert.equal(contractInterval('@yearly', 'UTC', 7, now), 10_080);
    });
  });

  describe('jitter', () => {
    it('is a number of milliseconds in [0, jitter_seconds × 1000], the same for the same id', () => {
      fc.assert(
        fc.property(fc.uuid(), fc.integer({ min: 0, max: 3600 }), (id, jitter) => {
          const offset = jitterOffsetMs(id, jitter);
          assert.ok(Number.isInteger(offset) && offset >= 0 && offset <= jitter * 1000);
          assert.equal(jitterOffsetMs(id, jitter), offset);
        }),
      );
      const spread = new Set(Array.from({ length: 50 }, (_, i) => jitterOffsetMs(`0190a0b0-0000-7000-8000-0000000000${String(i).padStart(2, '0')}`, 3600)));
      assert.ok(spread.size > 40, 'workflows spread over the window');
    });

    it('spreads a herd to the millisecond, not in bursts on whole seconds', () => {
      // 6,000 workflows on one cron time with up to 59 s of jitter (the scheduling benchmark's herd):
      // whole seconds put 100 in each of 60 instants; to the millisecond no instant holds more than a few.
      const perInstant = new Map<number, number>();
      for (const id of Array.from({ length: 6_000 }, () => randomUUID())) {
        const offset = jitterOffsetMs(id, 59);
        perInstant.set(offset, (perInstant.get(offset) ?? 0) + 1);
      }
      assert.ok(perInstant.size > 5_000, `${perInstant.size} distinct instants`);
      assert.ok(Math.max(...perInstant.values()) <= 6, `at most ${Math.max(...perInstant.values())} at one instant`);
    });

    it('moves every slot by the offset', () => {
      const plain = scheduleOf(fields({ cron: '0 * * * *' }))!;
      const jittered = scheduleOf(fields({ cron: '0 * * * *', jitterOffsetMs: jitterOffsetMs(ID, 600) }))!;
      const offset = jitterOffsetMs(ID, 600);
      const t = at('2026-02-01T10:30:00Z');
      assert.equal(jittered.firstSlotAfter(t + offset), plain.firstSlotAfter(t) + offset);
      assert.equal(jittered.mostRecentSlot(t + offset), plain.mostRecentSlot(t) + offset);
      assert.ok(jittered.isSlot(plain.firstSlotAfter(t) + offset));
    });
  });

  describe('properties: passes of the leader at any times', () => {
    const expressions = ['*/7 * * * *', '0 * * * *', '30 2 * * *', '*/15 1-3 * * *', '0 9 * * MON-FRI', '@daily'];
    const zones = ['UTC', 'Europe/Berlin', 'Australia/Sydney', 'Australia/Adelaide', 'Asia/Kolkata', 'America/New_York'];
    const schedule = fc.record({
      cron: fc.oneof(fc.constant(null), fc.constantFrom(...expressions)),
      timeZone: fc.constantFrom(...zones),
      intervalMinutes: fc.integer({ min: 1, max: 1440 }),
      jitterOffsetMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3_600_000 })),
      firstRun: fc.constantFrom('at_first_slot' as const, 'now' as const),
      catchUpPolicy: fc.constantFrom('latest' as const, 'none' as const),
      // around the transitions of 2026 in both hemispheres
      buildCompletedAt: fc.constantFrom('2026-03-27T12:00:00Z', '2026-04-03T12:00:00Z', '2026-10-02T12:00:00Z', '2026-10-24T12:00:00Z').map(at),
    });
    /** Gaps between passes: a tick, a minute, hours of downtime. */
    const gaps = fc.array(fc.oneof(fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 1, max: 2 * HOUR }), fc.integer({ min: 1, max: 3 * 24 * HOUR })), { minLength: 1, maxLength: 40 });

    it('every slot gets at most one job, and each slot up to the last one taken is run or counted skipped, once, whatever the first run and catch-up', () => {
      fc.assert(
        fc.property(schedule, gaps, (w, steps) => {
          const s = scheduleOf(w)!;
          // as recordBuildResult: the first slot at or after the build (the build's own with first run `now`)
          const first = s.firstSlotAfter(w.buildCompletedAt! - 1);
          let nextDueAt = first;
          let now = w.buildCompletedAt!;
          const runs: number[] = [];
          let lastTaken: number | undefined;
          let skipped = 0;
          for (const gap of steps) {
            now += gap;
            if (nextDueAt > now) continue; // not due: the store's due query leaves it out
            const slot = s.mostRecentSlot(now);
            assert.ok(slot <= now && s.isSlot(slot), 'a due slot that has come');
            assert.ok(s.firstSlotAfter(slot) > now, 'the most recent one');
            skipped += s.skippedBefore(slot, nextDueAt);
            // as DueSlots.plan: catch-up `none` passes over a slot taken too late
            if (catchUpSkips(w.catchUpPolicy, Math.max(slot, nextDueAt), now)) skipped += 1;
            else runs.push(slot);
            lastTaken = slot;
            nextDueAt = s.firstSlotAfter(slot);
          }
          assert.deepEqual(runs, [...new Set(runs)].sort((a, b) => a - b), 'strictly increasing: one job per slot');
          if (w.firstRun === 'now' && runs.length > 0 && w.catchUpPolicy === 'latest' && steps[0]! < s.firstSlotAfter(first) - first) assert.equal(runs[0], w.buildCompletedAt, 'the first run follows the build');
          if (lastTaken !== undefined) assert.equal(runs.length + skipped, s.countIn(first, lastTaken + 1), 'every slot run or skipped');
        }),
        { numRuns: 300 },
      );
    });
  });
});
