/** Work that could go to the runners now: a user's manual job, or a due slot of their workflow. */
export interface Candidate<T> {
  userId: string;
  /** Manual runs ("Run now") go before the user's due slots. */
  manual: boolean;
  /** When it became runnable: older first within a user. */
  since: number;
  item: T;
}

/**
 * Which candidates get the `room` the runners have, shared fairly across
 * users: fair queuing with equal weights. A user's k-th candidate ranks at
 * (their jobs already handed out) + k, and the lowest ranks win: a user with
 * nothing running goes before one holding many slots, and users wanting more
 * than their part end up with equal parts (max-min fairness). Within a user,
 * manual runs go first, then the oldest. Nothing is held back while there is
 * room (work-conserving); `cap`, when set, is a hard per-user limit on top
 * (MAX_ACTIVE_JOBS_PER_USER).
 */
export function fairPick<T>(candidates: readonly Candidate<T>[], active: ReadonlyMap<string, number>, room: number, cap?: number): Candidate<T>[] {
  if (room <= 0) return [];
  const byUser = new Map<string, Candidate<T>[]>();
  for (const c of candidates) {
    const list = byUser.get(c.userId);
    if (list) list.push(c);
    else byUser.set(c.userId, [c]);
  }
  const ranked: { rank: number; c: Candidate<T> }[] = [];
  for (const [userId, list] of byUser) {
    list.sort((a, b) => Number(b.manual) - Number(a.manual) || a.since - b.since);
    const held = active.get(userId) ?? 0;
    list.forEach((c, k) => {
      const rank = held + k + 1;
      if (cap === undefined || rank <= cap) ranked.push({ rank, c });
    });
  }
  ranked.sort((a, b) => a.rank - b.rank || Number(b.c.manual) - Number(a.c.manual) || a.c.since - b.c.since);
  return ranked.slice(0, room).map((r) => r.c);
}
