/**
 * How many jobs the runners can hold at once, as they tell it: every job
 * event carries its runner's slots (RUNNER_CONCURRENCY). A runner not heard
 * from for `ttlMs` no longer counts (stopped, or idle: the hand-out's
 * headroom gives an idle runner work, and its first event counts it again).
 * Undefined while no runner has spoken: the hand-out then falls back to the
 * queue bound alone (docs/adr/0011-work-conserving-fair-hand-out.md).
 */
export class RunnerCapacity {
  private readonly runners = new Map<string, { slots: number; seenAt: number }>();

  constructor(private readonly ttlMs: number) {}

  seen(runnerId: string, slots: number | undefined, now: number): void {
    if (slots !== undefined) this.runners.set(runnerId, { slots, seenAt: now });
  }

  /** The slots of the runners heard from lately; undefined if none was. */
  slots(now: number): number | undefined {
    let total = 0;
    for (const [id, r] of this.runners) {
      if (now - r.seenAt > this.ttlMs) this.runners.delete(id);
      else total += r.slots;
    }
    return this.runners.size > 0 ? total : undefined;
  }
}
