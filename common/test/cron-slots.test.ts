import assert from 'node:assert/strict';
import fc from 'fast-check';
import { CronSlots, cronProblem, timeZoneProblem } from '../src/domain/cron-slots.js';

const at = (iso: string) => Date.parse(iso);
const iso = (t: number) => new Date(t).toISOString().replace('.000Z', 'Z');
/** The local wall-clock time of an instant in a zone, written as a UTC time (a floating time). */
const formats = new Map<string, Intl.DateTimeFormat>();
function localOf(instant: number, zone: string): number {
  const p: Record<string, number> = {};
  let format = formats.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric' });
    formats.set(zone, format);
  }
  for (const part of format.formatToParts(instant)) if (part.type !== 'literal') p[part.type] = Number(part.value);
  return Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!);
}
const slots = (expr: string, zone: string, fromIso: string, n: number) => new CronSlots(expr, zone).upcoming(at(fromIso), n).map(iso);

describe('cron slots in a time zone', () => {
  describe('validation', () => {
    it('takes five fields and the named forms, and names what is wrong with anything else', () => {
      for (const ok of ['*/5 * * * *', '0 9 * * MON-FRI', '30 2 * * *', '@hourly', '@daily', '@weekly', '@monthly', '@yearly', '@annually', '@midnight', ' 0 0 1 1 * ']) {
        assert.equal(cronProblem(ok), undefined, ok);
      }
      assert.match(cronProblem('')!, /empty/);
      assert.match(cronProblem('* * *')!, /five fields/);
      assert.match(cronProblem('0 * * * * *')!, /five fields/, 'a seconds field is not offered');
      assert.match(cronProblem('@reboot')!, /one of @yearly/);
      assert.match(cronProblem('61 * * * *')!, /not a valid cron expression: .*minute/);
      assert.match(cronProblem('0 0 30 2 *')!, /never matches/);
      assert.equal(cronProblem('0 0 29 2 *'), undefined, 'a leap day comes within the horizon');
    });

    it('knows IANA zones and refuses anything else', () => {
      for (const zone of ['UTC', 'Europe/Berlin', 'Australia/Adelaide', 'Asia/Kolkata', 'America/Sao_Paulo']) assert.equal(timeZoneProblem(zone), undefined, zone);
      for (const zone of ['', 'Mars/Olympus', 'Europe/Berlin ', 'CEST+2']) assert.ok(timeZoneProblem(zone), zone);
    });
  });

  describe('the daylight-saving rule, across real transitions', () => {
    it('Europe/Berlin, spring (02:00 → 03:00): a local time that does not exist runs at the next valid minute, once', () => {
      assert.deepEqual(slots('30 2 * * *', 'Europe/Berlin', '2026-03-28T00:00:00Z', 3), ['2026-03-28T01:30:00Z', '2026-03-29T01:00:00Z', '2026-03-30T00:30:00Z']);
      // Four slots inside the missing hour collapse onto 03:00 CEST, then the clock goes on.
      assert.deepEqual(slots('*/15 2-3 * * *', 'Europe/Berlin', '2026-03-29T00:50:00Z', 4), [
        '2026-03-29T01:00:00Z',
        '2026-03-29T01:15:00Z',
        '2026-03-29T01:30:00Z',
        '2026-03-29T01:45:00Z',
      ]);
    });

    it('Europe/Berlin, autumn (03:00 → 02:00): a local time that occurs twice runs once, at its first occurrence', () => {
      assert.deepEqual(slots('30 2 * * *', 'Europe/Berlin', '2026-10-24T00:00:00Z', 3), ['2026-10-24T00:30:00Z', '2026-10-25T00:30:00Z', '2026-10-26T01:30:00Z']);
      assert.deepEqual(slots('*/30 * * * *', 'Europe/Berlin', '2026-10-24T23:45:00Z', 6), [
        '2026-10-25T00:00:00Z', // 02:00 CEST
        '2026-10-25T00:30:00Z', // 02:30 CEST
        // 02:00 and 02:30 CET come again: nothing runs
        '2026-10-25T02:00:00Z', // 03:00 CET
        '2026-10-25T02:30:00Z',
        '2026-10-25T03:00:00Z',
        '2026-10-25T03:30:00Z',
      ]);
    });

    it('Australia/Sydney, southern spring in October (02:00 → 03:00) and autumn in April (03:00 → 02:00)', () => {
      assert.deepEqual(slots('30 2 * * *', 'Australia/Sydney', '2026-10-02T00:00:00Z', 3), ['2026-10-02T16:30:00Z', '2026-10-03T16:00:00Z', '2026-10-04T15:30:00Z']);
      assert.deepEqual(slots('30 2 * * *', 'Australia/Sydney', '2026-04-03T00:00:00Z', 3), ['2026-04-03T15:30:00Z', '2026-04-04T15:30:00Z', '2026-04-05T16:30:00Z']);
    });

    it('Australia/Adelaide, a half-hour zone (+9:30 → +10:30): the gap and the repeat at its own offsets', () => {
      assert.deepEqual(slots('15 2 * * *', 'Australia/Adelaide', '2026-10-02T00:00:00Z', 3), ['2026-10-02T16:45:00Z', '2026-10-03T16:30:00Z', '2026-10-04T15:45:00Z']);
      assert.deepEqual(slots('15 2 * * *', 'Australia/Adelaide', '2026-04-03T00:00:00Z', 3), ['2026-04-03T15:45:00Z', '2026-04-04T15:45:00Z', '2026-04-05T16:45:00Z']);
    });

    it('America/New_York, and zones without daylight saving (Asia/Kolkata at +5:30, UTC)', () => {
      // 2026-03-08 02:00 EST → 03:00 EDT; 2026-11-01 02:00 EDT → 01:00 EST.
      assert.deepEqual(slots('0 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z', 2), ['2026-03-08T07:00:00Z', '2026-03-09T06:00:00Z']);
      assert.deepEqual(slots('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z', 2), ['2026-11-01T05:30:00Z', '2026-11-02T06:30:00Z']);
      assert.deepEqual(slots('@hourly', 'Asia/Kolkata', '2026-10-02T00:10:00Z', 2), ['2026-10-02T00:30:00Z', '2026-10-02T01:30:00Z']);
      assert.deepEqual(slots('0 9 * * MON', 'UTC', '2026-12-01T00:00:00Z', 2), ['2026-12-07T09:00:00Z', '2026-12-14T09:00:00Z']);
    });
  });

  describe('properties', () => {
    const zones = ['UTC', 'Europe/Berlin', 'Australia/Sydney', 'Australia/Adelaide', 'America/New_York', 'Asia/Kolkata', 'Pacific/Chatham'];
    const expressions = ['*/5 * * * *', '0 * * * *', '30 2 * * *', '15,45 1-3 * * *', '0 9 * * MON-FRI', '@daily', '*/7 * * * *'];
    const anyInstant = fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2030, 0, 1) });

    it('next(t) is after t, whole-minute, and the first: nothing it skipped would have been a slot', () => {
      fc.assert(
        fc.property(fc.constantFrom(...expressions), fc.constantFrom(...zones), anyInstant, (expr, zone, t) => {
          const s = new CronSlots(expr, zone);
          const next = s.next(t);
          assert.ok(next > t);
          assert.equal(next % 60_000, 0);
          // Any instant between t and next leads to the same next slot: no slot in between.
          const mid = t + Math.floor((next - t) / 2);
          assert.equal(s.next(mid), next);
        }),
        { numRuns: 300 },
      );
    });

    it('next(t) from the minutes it keeps answers as a fresh walk does, for a herd asking about instants in the same minutes', () => {
      fc.assert(
        fc.property(fc.constantFrom(...expressions), fc.constantFrom(...zones), anyInstant, fc.array(fc.integer({ min: -120_000, max: 120_000 }), { minLength: 1, maxLength: 30 }), (expr, zone, t, offsets) => {
          const kept = new CronSlots(expr, zone);
          for (const offset of offsets) {
            // upcoming() walks without the kept minutes
            assert.equal(kept.next(t + offset), new CronSlots(expr, zone).upcoming(t + offset, 1)[0], iso(t + offset));
          }
        }),
        { numRuns: 200 },
      );
    });

    it('slots strictly increase, and each one is a local time the expression names or the instant the clock jumps past one', () => {
      fc.assert(
        fc.property(fc.constantFrom(...expressions), fc.constantFrom(...zones), anyInstant, (expr, zone, t) => {
          const run = new CronSlots(expr, zone).upcoming(t, 50);
          const utc = new CronSlots(expr, 'UTC');
          for (let i = 0; i < run.length; i++) {
            if (i > 0) assert.ok(run[i]! > run[i - 1]!, `${iso(run[i - 1]!)} then ${iso(run[i]!)}`);
            const local = localOf(run[i]!, zone);
            const named = utc.next(local - 60_000) === local;
            const jumped = localOf(run[i]! - 60_000, zone) !== local - 60_000;
            assert.ok(named || jumped, `${iso(run[i]!)} is ${iso(local)} local in ${zone}`);
          }
        }),
        { numRuns: 200 },
      );
    });
  });

  it("a cron workflow's interval: the longest gap between runs, in minutes", () => {
    const from = at('2026-12-01T00:00:00Z');
    assert.equal(new CronSlots('*/5 * * * *').longestGapMinutes(from), 5);
    // Friday 09:00 CEST to Monday 09:00 CET, when the clocks go back in October: 73 hours.
    assert.equal(new CronSlots('0 9 * * MON-FRI', 'Europe/Berlin').longestGapMinutes(from), 73 * 60);
    // The repeated hour runs nothing: 02:00 CEST to 03:00 CET is two hours, once the next runs include it.
    assert.equal(new CronSlots('0 * * * *', 'Europe/Berlin').longestGapMinutes(from), 60);
    assert.equal(new CronSlots('0 * * * *', 'Europe/Berlin').longestGapMinutes(at('2026-10-20T00:00:00Z')), 120);
    assert.equal(new CronSlots('0 * * * *', 'Asia/Kolkata').longestGapMinutes(from), 60);
    assert.equal(new CronSlots('@monthly').longestGapMinutes(from), 31 * 24 * 60);
  });
});
