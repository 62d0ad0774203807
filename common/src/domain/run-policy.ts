/**
 * How a workflow's automatic runs meet overruns, downtime and its build
 * (issue 25, ADR 0020). Each default is what orloj did before the policy
 * existed, so a workflow whose owner chooses nothing runs as it always did.
 *
 * - Overlap (a slot comes while the previous run still goes; runs never
 *   overlap): `run_after` runs the most recent such slot once, as soon as
 *   the running job ends (late); `skip` runs none of them, and the workflow
 *   waits for its next slot.
 * - Catch-up (a slot taken more than {@link CATCH_UP_GRACE_MS} after it came:
 *   orloj was down, a leader change, runners far behind): `latest` runs the
 *   most recent missed slot; `none` runs none, and the workflow waits for its
 *   next slot.
 * - First run: `at_first_slot` waits for the schedule's first slot after the
 *   build; `now` adds one slot at the build's completion, so a run follows
 *   each build at once.
 */
export const OVERLAP_POLICIES = ['run_after', 'skip'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];
export const CATCH_UP_POLICIES = ['latest', 'none'] as const;
export type CatchUpPolicy = (typeof CATCH_UP_POLICIES)[number];
export const FIRST_RUNS = ['at_first_slot', 'now'] as const;
export type FirstRun = (typeof FIRST_RUNS)[number];

export interface RunPolicy {
  overlapPolicy: OverlapPolicy;
  catchUpPolicy: CatchUpPolicy;
  firstRun: FirstRun;
}

export const DEFAULT_RUN_POLICY: Readonly<RunPolicy> = Object.freeze({ overlapPolicy: 'run_after', catchUpPolicy: 'latest', firstRun: 'at_first_slot' });

/**
 * How late a slot may be taken and still count as on time for catch-up
 * `none`. Longer than a leader change (LEADER_LEASE_TTL, 15 s by default) and
 * a few busy passes, so only real downtime or a long backlog skips a slot.
 */
export const CATCH_UP_GRACE_MS = 60_000;

/** Whether catch-up `policy` leaves `slot`, taken at `now`, without a run. */
export function catchUpSkips(policy: CatchUpPolicy, slot: number, now: number): boolean {
  return policy === 'none' && now - slot > CATCH_UP_GRACE_MS;
}
