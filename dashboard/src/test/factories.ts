import type { LogEntry, LogPage, Workflow } from '../api/client';

/** Test data in the api's wire shapes; each call may override any field. */
export function workflow(overrides: Partial<Workflow> = {}): Workflow {
  return {
    id: '0190a5b2-7c3e-7d4f-8a1b-2c3d4e5f6a7b',
    name: 'Homepage',
    payload: JSON.stringify({ endpoint: 'https://example.com/health' }),
    kind: 'HEARTBEAT',
    build_status: 'COMPLETED',
    interval: 5,
    consecutive_job_failures_count: 0,
    max_consecutive_job_failures_allowed: 3,
    created_at: '2026-11-01T10:00:00.000Z',
    updated_at: '2026-11-01T10:00:00.000Z',
    log_retention: false,
    generation: 0,
    ...overrides,
  };
}

export function logEntry(sequence_num: number, message: string, stream: LogEntry['stream'] = 'stdout'): LogEntry {
  return {
    timestamp: new Date(Date.UTC(2026, 10, 1, 10, 0, sequence_num)).toISOString(),
    message,
    sequence_num,
    stream,
    event_id: `job:1:${sequence_num}`,
  };
}

export function logPage(logs: LogEntry[], cursor = '', highlight_token = ''): LogPage {
  return { id: 'job', workflow_id: 'wf', logs, cursor, highlight_token };
}
