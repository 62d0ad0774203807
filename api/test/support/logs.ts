import assert from 'node:assert/strict';
import type { ApiHarness } from './harness.js';
import { key, workflowBody } from './harness.js';
import type { TestClient } from './client.js';

/** Test data for the log routes: workflows through the API, jobs and lines straight into the store. */

export interface Line {
  sequence_num: number;
  stream: 'stdout' | 'stderr';
  message: string;
  timestamp: number;
}

export const T0 = Date.UTC(2030, 0, 2, 3, 4, 5, 678);

export async function containerWorkflow(c: TestClient, options: { logRetention?: boolean } = {}): Promise<string> {
  const body = workflowBody({
    name: 'Logs',
    kind: 'CONTAINER',
    payload: JSON.stringify({ image: 'alpine:3.20', cmd: ['echo', 'hi'] }),
    ...(options.logRetention === undefined ? {} : { log_retention: options.logRetention }),
  });
  const res = await c.post('/workflows', body, { headers: key() });
  assert.equal(res.status, 201, res.text);
  return res.json.id as string;
}

export async function heartbeatWorkflow(c: TestClient): Promise<string> {
  const res = await c.post('/workflows', workflowBody(), { headers: key() });
  assert.equal(res.status, 201, res.text);
  return res.json.id as string;
}

/** Lines with the given messages, numbered from `from`, alternating streams unless told. */
export function lines(messages: readonly string[], from = 0, stream?: (i: number) => 'stdout' | 'stderr'): Line[] {
  return messages.map((message, i) => ({
    sequence_num: from + i,
    stream: stream ? stream(from + i) : (from + i) % 3 === 2 ? 'stderr' : 'stdout',
    message,
    timestamp: T0 + (from + i) * 7,
  }));
}

/** Writes lines of one job attempt straight into job_logs, in chunks. */
export async function insertLines(h: ApiHarness, jobId: string, attempt: number, rows: readonly Line[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 1000) {
    await h.db.handle.db
      .insertInto('job_logs')
      .values(rows.slice(i, i + 1000).map((l) => ({ job_id: jobId, attempt, ...l })))
      .execute();
  }
}

export function logsPath(workflowId: string, jobId: string, suffix = ''): string {
  return `/workflows/${workflowId}/jobs/${jobId}/logs${suffix}`;
}

/** The log entry the contract prescribes for a stored line, written out independently of present.ts. */
export function entry(jobId: string, attempt: number, l: Line, message = l.message) {
  return {
    timestamp: new Date(l.timestamp).toISOString(),
    message,
    sequence_num: l.sequence_num,
    stream: l.stream,
    event_id: `${jobId}:${attempt}:${l.sequence_num}`,
  };
}
