import { newId, type Workflow } from '@orloj/common';

/** A workflow record with neutral defaults (an unbuilt HEARTBEAT one); tests override what they care about. */
export function workflowFixture(userId: string, overrides: Partial<Workflow> = {}): Workflow {
  return {
    id: newId(),
    userId,
    name: 'w',
    payload: JSON.stringify({ endpoint: 'https://example.com' }),
    kind: 'HEARTBEAT',
    buildStatus: 'QUEUED',
    intervalMinutes: 1,
    consecutiveJobFailuresCount: 0,
    maxConsecutiveJobFailuresAllowed: 3,
    logRetention: false,
    generation: 0,
    createdAt: 0,
    updatedAt: 0,
    terminatedAt: null,
    buildCompletedAt: null,
    nextDueAt: null,
    buildToken: 0,
    ...overrides,
  };
}
