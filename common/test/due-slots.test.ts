/**
 * Due-slot arithmetic (common/src/domain/due-slots.ts) as properties over every
 * interval the API takes (1 to 10080 minutes), build times across the years
 * (DST dates included: the arithmetic is UTC milliseconds, so a slot never
 * moves with a local clock change), and clock jumps either way.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { firstSlotAfter, mostRecentSlot } from '@orloj/common/domain';

const MINUTE = 60_000;
const YEAR = 366 * 24 * 60 * MINUTE;
// 2000-01-01 … 2100-01-01 UTC
const instant = fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2100, 0, 1) });
const intervalMs = fc.integer({ min: 1, max: 10_080 }).map((m) => m * MINUTE);
/** A moment relative to the anchor: before the build, inside the first interval, or years on. */
const offset = fc.oneof(fc.integer({ min: -YEAR, max: 0 }), fc.integer({ min: 0, max: 20_160 * MINUTE }), fc.integer({ min: 0, max: 5 * YEAR }));

const onGrid = (anchor: number, interval: number, slot: number) => (slot - anchor) % interval === 0 && slot >= anchor + interval;

describe('due-slot arithmetic (properties)', () => {
  it('mostRecentSlot is the latest slot at or before now, or the first slot before it has come', () => {
    fc.assert(
      fc.property(instant, intervalMs, offset, (anchor, interval, d) => {
        const now = anchor + d;
        const slot = mostRecentSlot(anchor, interval, now);
        assert.ok(onGrid(anchor, interval, slot), 'on the grid anchor + k × interval, k ≥ 1');
        if (now < anchor + interval) assert.equal(slot, anchor + interval);
        else assert.ok(slot <= now && now < slot + interval, 'no slot lies between it and now');
      }),
    );
  });

  it('firstSlotAfter is the first slot strictly after t, and no slot lies between', () => {
    fc.assert(
      fc.property(instant, intervalMs, offset, (anchor, interval, d) => {
        const t = anchor + d;
        const slot = firstSlotAfter(anchor, interval, t);
        assert.ok(onGrid(anchor, interval, slot));
        assert.ok(slot > t, 'strictly after t');
        assert.ok(slot === anchor + interval || slot - interval <= t, 'the slot before it is not after t');
        if (t >= anchor + interval) assert.equal(slot, mostRecentSlot(anchor, interval, t) + interval);
      }),
    );
  });

  it('walking firstSlotAfter from the build visits every slot once, in order', () => {
    fc.assert(
      fc.property(instant, intervalMs, fc.integer({ min: 1, max: 50 }), (anchor, interval, steps) => {
        let slot = anchor;
        for (let k = 1; k <= steps; k++) {
          slot = firstSlotAfter(anchor, interval, slot);
          assert.equal(slot, anchor + k * interval);
        }
      }),
    );
  });

  it('moves with the clock: a jump forward never gives an earlier slot, a jump back never a later one', () => {
    fc.assert(
      fc.property(instant, intervalMs, offset, offset, (anchor, interval, a, b) => {
        const [early, late] = a <= b ? [anchor + a, anchor + b] : [anchor + b, anchor + a];
        assert.ok(mostRecentSlot(anchor, interval, early) <= mostRecentSlot(anchor, interval, late));
        assert.ok(firstSlotAfter(anchor, interval, early) <= firstSlotAfter(anchor, interval, late));
        // However far the clock jumped, only the most recent missed slot is due: one run, never a replay.
        const missed = mostRecentSlot(anchor, interval, late);
        assert.ok(firstSlotAfter(anchor, interval, missed) > late);
      }),
    );
  });

  it('keeps the time of day across a DST change: slots are whole intervals of UTC milliseconds', () => {
    // The nights clocks change in the EU and the US in 2026, and an hourly and a daily workflow built just before.
    for (const change of [Date.UTC(2026, 2, 29, 1), Date.UTC(2026, 9, 25, 1), Date.UTC(2026, 2, 8, 7), Date.UTC(2026, 10, 1, 6)]) {
      for (const interval of [60 * MINUTE, 1440 * MINUTE]) {
        const anchor = change - 90 * MINUTE;
        const after = mostRecentSlot(anchor, interval, change + 3 * interval);
        assert.equal((after - anchor) % interval, 0);
        assert.equal(new Date(after).getUTCMinutes(), new Date(anchor).getUTCMinutes());
        if (interval === 1440 * MINUTE) assert.equal(new Date(after).getUTCHours(), new Date(anchor).getUTCHours());
      }
    }
  });
});
