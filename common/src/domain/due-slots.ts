/**
 * Schedule arithmetic. Slots are anchored to the build's completion:
 * anchor + k × interval, k ≥ 1. Only the most recent missed slot runs after
 * downtime or an overrun, so slots are never replayed back to back.
 */

/** The latest slot at or before `now` (or the first slot, if none has come yet). */
export function mostRecentSlot(anchor: number, intervalMs: number, now: number): number {
  if (now < anchor + intervalMs) return anchor + intervalMs;
  return anchor + Math.floor((now - anchor) / intervalMs) * intervalMs;
}

/** The first slot strictly after `t`. */
export function firstSlotAfter(anchor: number, intervalMs: number, t: number): number {
  if (t < anchor + intervalMs) return anchor + intervalMs;
  return anchor + (Math.floor((t - anchor) / intervalMs) + 1) * intervalMs;
}
