import type { ExpressionBuilder } from 'kysely';
import { ATTENTION_STATES, attentionRank, type AttentionCounts, type AttentionState } from '../../domain/attention.js';
import { slot, type ReadRunner } from '../compiled-read.js';
import type { Database } from '../schema.js';

/**
 * The list's keyset condition: after the cursor's workflow, newest first, or
 * with `byAttention` by attention rank first (the cursor's `afterRank`), then newest first.
 */
export function afterPosition(eb: ExpressionBuilder<Database, 'workflows'>, byAttention: boolean) {
  const k = slot<number>('afterKey');
  const newer = eb.or([eb('created_at', '<', k), eb.and([eb('created_at', '=', k), eb('id', '<', slot<string>('afterId'))])]);
  if (!byAttention) return newer;
  const rank = slot<number>('afterRank');
  return eb.or([eb('attention', '>', rank), eb.and([eb('attention', '=', rank), newer])]);
}

/** The list statement's values for the attention filter and the attention order's cursor. */
export function attentionArgs(f: { attention?: AttentionState; after?: { rank?: number } }): { afterRank: number; attention: number | undefined } {
  return { afterRank: f.after?.rank ?? 0, attention: f.attention === undefined ? undefined : attentionRank(f.attention) };
}

/**
 * How many of the user's workflows are in each attention state
 * (domain/attention.ts), all of them (terminated ones too), read from the
 * attention index (migration 0019) without touching a run: at 100,000
 * workflows an index-only count, off the event loop as a heavy read.
 */
export async function attentionCounts(runner: ReadRunner, userId: string): Promise<AttentionCounts> {
  const read = runner.reads.get('workflows.attentionCounts', (db) =>
    db
      .selectFrom('workflows')
      .select(['attention', (eb) => eb.fn.countAll<number | string>().as('n')])
      .where('user_id', '=', slot<string>('userId'))
      .groupBy('attention'),
  );
  const rows = (await runner.rows(read, { userId }, { heavy: true })) as [rank: number, n: number | string][];
  const counts = Object.fromEntries(ATTENTION_STATES.map((s) => [s, 0])) as AttentionCounts;
  for (const [rank, n] of rows) {
    const state = ATTENTION_STATES[Number(rank)];
    if (state) counts[state] = Number(n);
  }
  return counts;
}
