/** A workflow's jitter (issue 25): where in [0, jitter_seconds] its slots fall. */

/**
 * The workflow's jitter offset, fixed when the workflow is created or its
 * `jitter_seconds` changes (stored as `jitter_offset_ms`): a number of
 * milliseconds in [0, jitterSeconds × 1000], from a hash of its id, so every
 * scheduler and every restart agrees and the slots stay put. To the
 * millisecond, so that a herd of workflows on one cron time spreads over the
 * jitter as interval workflows spread over their interval, instead of meeting
 * in bursts on whole seconds (issue 25's benchmark). Workflows jittered before
 * migration 0029 keep the whole seconds they had (the migration stores them),
 * so no slot moves on the upgrade.
 */
export function jitterOffsetMs(workflowId: string, jitterSeconds: number): number {
  if (jitterSeconds <= 0) return 0;
  return fnv1a32(workflowId) % (jitterSeconds * 1000 + 1);
}

/** FNV-1a, 32 bits. */
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}
