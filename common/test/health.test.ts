import assert from 'node:assert/strict';
import { checkFromMessage, checkToMessage, LATE_AFTER_MS, workflowHealth, type RunFacts, type RunSummary } from '@orloj/common/domain';

const NOW = Date.UTC(2026, 0, 1, 12);
const active = { buildStatus: 'COMPLETED', terminatedAt: null, consecutiveJobFailuresCount: 0, maxConsecutiveJobFailuresAllowed: 3, alertDown: false } as const;
const run = (status: RunSummary['status'], minutesAgo: number): RunSummary => ({
  jobId: `job-${minutesAgo}`,
  status,
  scheduledAt: NOW - minutesAgo * 60_000,
  completedAt: NOW - minutesAgo * 60_000 + 10,
  check: null,
});
const facts = (f: Partial<RunFacts> = {}): RunFacts => ({
  recent: [],
  window: { completed: 0, failed: 0, canceled: 0 },
  open: [],
  nextDueAt: NOW + 60_000,
  ...f,
});

describe('workflow health', () => {
  it('is down by the alert policy, not by one failed run: degraded until then, down until recovered by it', () => {
    assert.equal(workflowHealth(active, facts({ recent: [run('FAILED', 1)] }), NOW).state, 'degraded');
    assert.equal(workflowHealth({ ...active, alertDown: true }, facts({ recent: [run('FAILED', 1)] }), NOW).state, 'down');
    assert.equal(workflowHealth({ ...active, alertDown: true }, facts({ recent: [run('COMPLETED', 1), run('FAILED', 2)] }), NOW).state, 'down');
  });

  it('decides by the first rule that holds: paused, building, down, late, up, pending', () => {
    assert.equal(workflowHealth({ ...active, terminatedAt: NOW }, facts({ recent: [run('FAILED', 1)] }), NOW).state, 'paused');
    assert.equal(workflowHealth({ ...active, buildStatus: 'STARTED' }, facts(), NOW).state, 'building');
    assert.equal(workflowHealth({ ...active, buildStatus: 'FAILED' }, facts(), NOW).state, 'down');
    const overdue = NOW - LATE_AFTER_MS - 1;
    assert.equal(workflowHealth({ ...active, alertDown: true }, facts({ recent: [run('FAILED', 2)], nextDueAt: overdue }), NOW).state, 'down');
    assert.equal(workflowHealth(active, facts({ recent: [run('COMPLETED', 2)], nextDueAt: overdue }), NOW).state, 'late');
    assert.equal(workflowHealth(active, facts({ recent: [run('COMPLETED', 2)], nextDueAt: NOW - LATE_AFTER_MS }), NOW).state, 'up', 'within the grace');
    assert.equal(workflowHealth(active, facts({ recent: [run('CANCELED', 1), run('COMPLETED', 2)] }), NOW).state, 'up');
    assert.equal(workflowHealth(active, facts({ recent: [run('CANCELED', 1)] }), NOW).state, 'pending');
  });

  it('is never late while a run goes on; a job waiting past its slot makes it late', () => {
    const overdue = NOW - LATE_AFTER_MS - 1;
    const running = workflowHealth(active, facts({ nextDueAt: overdue, open: [{ jobId: 'r', status: 'RUNNING', scheduledAt: overdue }] }), NOW);
    assert.equal(running.state, 'pending');
    assert.equal(running.running?.jobId, 'r');
    const queued = workflowHealth(active, facts({ open: [{ jobId: 'q', status: 'QUEUED', scheduledAt: overdue }] }), NOW);
    assert.equal(queued.state, 'late');
    assert.equal(queued.nextRunAt, overdue);
  });

  it('calls out automatic termination only when the failure limit was reached', () => {
    assert.equal(workflowHealth({ ...active, terminatedAt: NOW, consecutiveJobFailuresCount: 3 }, facts(), NOW).autoTerminated, true);
    assert.equal(workflowHealth({ ...active, terminatedAt: NOW, consecutiveJobFailuresCount: 1 }, facts(), NOW).autoTerminated, false);
    assert.equal(workflowHealth({ ...active, consecutiveJobFailuresCount: 3 }, facts(), NOW).autoTerminated, false);
    assert.equal(workflowHealth({ ...active, terminatedAt: NOW }, facts(), NOW).nextRunAt, null);
  });

  it('reads a check from a message strictly and writes it back unchanged', () => {
    const message = { status_code: 503, response_time_ms: 12, failure: 'status' } as const;
    assert.deepEqual(checkToMessage(checkFromMessage(message)!), message);
    assert.deepEqual(checkFromMessage({ response_time_ms: 0 }), { statusCode: null, responseTimeMs: 0, failure: null });
    for (const bad of [null, 'x', {}, { response_time_ms: -1 }, { response_time_ms: 1.5 }, { response_time_ms: 1, status_code: 42 }, { response_time_ms: 1, failure: 'other' }]) {
      assert.equal(checkFromMessage(bad), undefined, JSON.stringify(bad));
    }
  });
});
