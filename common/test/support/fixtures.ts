import { newWorkflow, type Workflow } from '@orloj/common/domain';

/** A workflow record with neutral defaults (an unbuilt HEARTBEAT one, created at 0); tests override what they care about. */
export function workflowFixture(userId: string, overrides: Partial<Workflow> = {}): Workflow {
  return {
    ...newWorkflow({ userId, name: 'w', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: 'https://example.com' }), intervalMinutes: 1, maxConsecutiveJobFailuresAllowed: 3 }, 0),
    ...overrides,
  };
}
