/**
 * Maintenance windows (common/src/domain/maintenance-window.ts): one-off and
 * recurring spans, recurring ones across real daylight-saving transitions, and
 * which workflows a window covers.
 */
import assert from 'node:assert/strict';
import { currentOrNextSpan, isMuted, skipsSlot, snoozeProblem, spanAt, SNOOZE_MAX_MS, type MaintenanceWindow } from '@orloj/common/domain';

const MINUTE = 60_000;
const at = (iso: string) => Date.parse(iso);
const iso = (t: number | undefined) => (t === undefined ? undefined : new Date(t).toISOString().replace('.000Z', 'Z'));
const USER = '0190a0b0-0000-7000-8000-0000000000aa';
const WORKFLOW = { id: '0190a0b0-0000-7000-8000-000000000001', name: 'Nightly DB backup', userId: USER };

function window(over: Partial<MaintenanceWindow>): MaintenanceWindow {
  return { id: 'w', userId: USER, name: 'w', mode: 'skip', snooze: false, createdAt: 0, updatedAt: 0, workflowId: WORKFLOW.id, startsAt: at('2026-03-01T00:00:00Z'), endsAt: at('2026-03-01T02:00:00Z'), ...over } as MaintenanceWindow;
}
const recurring = (cron: string, timeZone: string, durationMinutes: number) => ({ cron, timeZone, durationMinutes });

describe('maintenance windows', () => {
  it('a one-off window holds from its start (inclusive) to its end (exclusive)', () => {
    const w = { startsAt: at('2026-03-01T00:00:00Z'), endsAt: at('2026-03-01T02:00:00Z') };
    assert.equal(spanAt(w, at('2026-02-28T23:59:59Z')), undefined);
    assert.deepEqual(spanAt(w, at('2026-03-01T00:00:00Z')), { start: w.startsAt, end: w.endsAt });
    assert.ok(spanAt(w, at('2026-03-01T01:59:59Z')));
    assert.equal(spanAt(w, at('2026-03-01T02:00:00Z')), undefined);
    assert.deepEqual(currentOrNextSpan(w, at('2026-02-01T00:00:00Z')), { start: w.startsAt, end: w.endsAt });
    assert.equal(currentOrNextSpan(w, at('2026-03-02T00:00:00Z')), undefined, 'over');
  });

  it('a recurring window holds for its duration after each cron instant', () => {
    const w = recurring('0 22 * * 6', 'UTC', 120); // Saturdays 22:00–24:00
    assert.equal(spanAt(w, at('2026-03-07T21:59:00Z')), undefined);
    assert.equal(iso(spanAt(w, at('2026-03-07T22:00:00Z'))?.start), '2026-03-07T22:00:00Z');
    assert.equal(iso(spanAt(w, at('2026-03-07T23:59:59Z'))?.end), '2026-03-08T00:00:00Z');
    assert.equal(spanAt(w, at('2026-03-08T00:00:00Z')), undefined);
    assert.equal(iso(currentOrNextSpan(w, at('2026-03-08T00:00:00Z'))?.start), '2026-03-14T22:00:00Z');
  });

  describe('across daylight-saving transitions', () => {
    it('Europe/Berlin: 02:30 does not exist on 29 March, so that night it starts when the clock jumps, and lasts its duration', () => {
      const w = recurring('30 2 * * *', 'Europe/Berlin', 60);
      // 28 Mar 02:30 CET = 01:30Z; 29 Mar: 02:00 CET → 03:00 CEST at 01:00Z; 30 Mar 02:30 CEST = 00:30Z
      assert.equal(iso(spanAt(w, at('2026-03-28T02:00:00Z'))?.start), '2026-03-28T01:30:00Z');
      assert.deepEqual([spanAt(w, at('2026-03-29T01:30:00Z'))].map((s) => s && [iso(s.start), iso(s.end)]), [['2026-03-29T01:00:00Z', '2026-03-29T02:00:00Z']]);
      assert.equal(spanAt(w, at('2026-03-29T02:00:00Z')), undefined);
      assert.equal(iso(spanAt(w, at('2026-03-30T01:00:00Z'))?.start), '2026-03-30T00:30:00Z');
    });

    it('America/New_York: a local time that occurs twice starts once, at its first occurrence, and lasts real minutes', () => {
      const w = recurring('30 1 * * *', 'America/New_York', 30);
      // 1 Nov 01:30 EDT = 05:30Z runs; the repeated 01:30 EST = 06:30Z does not start another
      assert.equal(iso(spanAt(w, at('2026-11-01T05:45:00Z'))?.start), '2026-11-01T05:30:00Z');
      assert.equal(spanAt(w, at('2026-11-01T06:45:00Z')), undefined);
      assert.equal(iso(currentOrNextSpan(w, at('2026-11-01T06:45:00Z'))?.start), '2026-11-02T06:30:00Z');
    });

    it('Asia/Kolkata (+5:30, no DST) and Australia/Sydney (southern hemisphere, clocks forward in October)', () => {
      assert.equal(iso(spanAt(recurring('0 9 * * *', 'Asia/Kolkata', 60), at('2026-06-01T03:45:00Z'))?.start), '2026-06-01T03:30:00Z');
      const sydney = recurring('30 2 * * *', 'Australia/Sydney', 60);
      // 4 Oct 02:30 does not exist (02:00 → 03:00 AEDT at 3 Oct 16:00Z)
      assert.equal(iso(spanAt(sydney, at('2026-10-03T16:30:00Z'))?.start), '2026-10-03T16:00:00Z');
      assert.equal(spanAt(sydney, at('2026-10-03T17:00:00Z')), undefined);
    });
  });

  it('covers one workflow by id, or those of its owner whose name contains the query, at the time it is asked', () => {
    const t = at('2026-03-01T01:00:00Z');
    assert.ok(skipsSlot([window({})], WORKFLOW, t));
    assert.ok(!skipsSlot([window({ workflowId: 'other' })], WORKFLOW, t));
    const byName = window({ workflowId: undefined, workflowQuery: 'db BACKUP' } as Partial<MaintenanceWindow>);
    assert.ok(skipsSlot([byName], WORKFLOW, t));
    assert.ok(!skipsSlot([byName], { ...WORKFLOW, name: 'Renamed' }, t), 'a renamed workflow leaves the window');
    assert.ok(!skipsSlot([byName], { ...WORKFLOW, userId: 'someone else' }, t), "another user's window never applies");
  });

  it('a skip window also mutes; a mute window only mutes', () => {
    const t = at('2026-03-01T01:00:00Z');
    assert.ok(isMuted([window({ mode: 'skip' })], WORKFLOW, t));
    assert.ok(isMuted([window({ mode: 'mute' })], WORKFLOW, t));
    assert.ok(!skipsSlot([window({ mode: 'mute' })], WORKFLOW, t));
    assert.ok(!isMuted([window({})], WORKFLOW, at('2026-03-01T02:00:00Z')));
  });

  it('a snooze is in the future and at most 30 days ahead', () => {
    const now = at('2026-03-01T00:00:00Z');
    assert.equal(snoozeProblem(now + MINUTE, now), undefined);
    assert.equal(snoozeProblem(now + SNOOZE_MAX_MS, now), undefined);
    assert.match(snoozeProblem(now, now)!, /future/);
    assert.match(snoozeProblem(now + SNOOZE_MAX_MS + 1, now)!, /30 days/);
    assert.match(snoozeProblem(Number.NaN, now)!, /RFC 3339/);
  });
});
