import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { Workflow } from '../api/client';
import { retryAfterMs, runBulk } from '../api/bulk';
import { BulkActions } from '../components/bulk-actions';
import { WorkflowsPage } from '../routes/workflows';
import { workflow } from './factories';
import { fakeApi } from './fake-api';
import { renderWithProviders } from './render';

const problem = (status: number, code: string, title: string, detail: string, headers: Record<string, string> = {}) =>
  Response.json({ status, code, title, detail }, { status, headers: { 'Content-Type': 'application/problem+json', ...headers } });

/**
 * The api's commands over a few workflows, as docs/api.md says they answer:
 * pause and resume 204 (412 when terminated), run now 201 (412 when
 * terminated), PATCH 204 then 412; a known Idempotency-Key replays. Records
 * each request and the most requests in flight at once.
 */
function fakeCommands(workflows: Workflow[], options: { limited?: number } = {}) {
  const state = new Map(workflows.map((w) => [w.id, { paused: !!w.paused_at, terminated: !!w.terminated_at }]));
  const replies = new Map<string, { status: number; body: string | null }>();
  const requests: { method: string; path: string; key: string | null }[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let limited = options.limited ?? 0;
  fakeApi.handle = async (request) => {
    const path = new URL(request.url).pathname;
    const key = request.headers.get('Idempotency-Key');
    requests.push({ method: request.method, path, key });
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      await new Promise((r) => setTimeout(r, 5)); // each request stays in flight a moment, so requests that overlap are seen overlapping (maxInFlight)
      if (limited > 0) {
        limited--;
        return problem(429, 'rate_limited', 'Too Many Requests', 'Slow down.', { 'Retry-After': '0' });
      }
      if (request.method === 'GET' && path === '/api/workflows') return Response.json({ workflows, cursor: '' });
      const id = path.split('/')[3]!;
      const s = state.get(id)!;
      const stored = key && request.method === 'POST' ? replies.get(`${key} ${path}`) : undefined;
      if (stored) return new Response(stored.body, { status: stored.status, headers: { 'Idempotent-Replayed': 'true', 'Content-Type': 'application/json' } });
      if (s.terminated) return problem(412, 'workflow_terminated', 'Precondition Failed', 'The workflow is terminated; update it (PUT) to reactivate it.');
      let reply: { status: number; body: string | null } = { status: 204, body: null };
      if (request.method === 'PATCH') s.terminated = true;
      else if (path.endsWith('/pause')) s.paused = true;
      else if (path.endsWith('/resume')) s.paused = false;
      else reply = { status: 201, body: JSON.stringify({ id: `job-${requests.length}` }) };
      if (key && request.method === 'POST') replies.set(`${key} ${path}`, reply);
      return new Response(reply.body, { status: reply.status, headers: { 'Content-Type': 'application/json' } });
    } finally {
      inFlight--;
    }
  };
  return { state, requests, maxInFlight: () => maxInFlight };
}

const three = [
  workflow({ id: '00000000-0000-4000-8000-000000000001', name: 'alpha' }),
  workflow({ id: '00000000-0000-4000-8000-000000000002', name: 'beta', paused_at: '2026-11-01T11:00:00.000Z' }),
  workflow({ id: '00000000-0000-4000-8000-000000000003', name: 'gamma', terminated_at: '2026-11-01T11:00:00.000Z' }),
];

const resultOf = (name: string) => within(screen.getByRole('table', { name: 'Bulk action results' })).getByRole('row', { name: new RegExp(`^${name}`) });

describe('bulk actions', () => {
  it('pauses each selected workflow once, reports each one, and a repeated click replays with the same keys', async () => {
    const api = fakeCommands(three);
    const user = userEvent.setup();
    let finished = 0;
    renderWithProviders(<BulkActions selected={three} onClear={() => {}} onFinished={() => finished++} />);
    await user.click(screen.getByRole('button', { name: 'Pause' }));
    await waitFor(() => expect(screen.getByRole('status').textContent).toBe('Pause: 1 done, 1 already so, 1 refused.'));
    expect(resultOf('alpha').textContent).toBe('alphadone — paused');
    expect(resultOf('beta').textContent).toBe('betaalready so — already paused');
    expect(resultOf('gamma').textContent).toMatch(/^gammarefused — Precondition Failed: The workflow is terminated/);
    expect(finished).toBe(1);
    const first = api.requests.map((r) => r.key);
    expect(new Set(first).size).toBe(3);

    await user.click(screen.getByRole('button', { name: 'Pause' }));
    await waitFor(() => expect(finished).toBe(2));
    expect(api.requests.slice(3).map((r) => r.key)).toEqual(first);
    expect(resultOf('alpha').textContent).toBe('alphaalready so — already paused by an earlier click');
    expect(api.state.get(three[0]!.id)!.paused).toBe(true);
  });

  it('forgets the keys when another action runs, so pause, resume, pause all act', async () => {
    const one = [three[0]!];
    const api = fakeCommands(one);
    const user = userEvent.setup();
    let finished = 0;
    renderWithProviders(<BulkActions selected={one} onClear={() => {}} onFinished={() => finished++} />);
    for (const [i, action] of (['Pause', 'Resume', 'Pause'] as const).entries()) {
      await user.click(screen.getByRole('button', { name: action }));
      await waitFor(() => expect(finished).toBe(i + 1));
    }
    expect(api.state.get(one[0]!.id)!.paused).toBe(true);
    expect(new Set(api.requests.map((r) => r.key)).size).toBe(3);
  });

  it('runs now once per workflow even when clicked twice, naming the job', async () => {
    const api = fakeCommands([three[0]!]);
    const user = userEvent.setup();
    let finished = 0;
    renderWithProviders(<BulkActions selected={[three[0]!]} onClear={() => {}} onFinished={() => finished++} />);
    await user.click(screen.getByRole('button', { name: 'Run now' }));
    await waitFor(() => expect(finished).toBe(1));
    expect(resultOf('alpha').textContent).toBe('alphadone — run scheduled (job job-1)');
    await user.click(screen.getByRole('button', { name: 'Run now' }));
    await waitFor(() => expect(finished).toBe(2));
    expect(resultOf('alpha').textContent).toBe('alphaalready so — already run scheduled by an earlier click (job job-1)');
    expect(api.requests.map((r) => r.path)).toEqual(Array(2).fill(`/api/workflows/${three[0]!.id}/jobs/schedule`));
  });

  it('terminates only after the confirm, with a danger button, and reads a second terminate as already so', async () => {
    const two = three.slice(0, 2);
    const api = fakeCommands(two);
    const user = userEvent.setup();
    let finished = 0;
    renderWithProviders(<BulkActions selected={two} onClear={() => {}} onFinished={() => finished++} />);
    const terminate = screen.getByRole('button', { name: 'Terminate' });
    expect(terminate.className).toBe('danger');
    await user.click(terminate);
    const dialog = screen.getByRole('alertdialog', { name: /^Terminate 2 workflows\?/ });
    expect(api.requests).toEqual([]);
    // Escape cancels; nothing is sent.
    await user.keyboard('{Escape}');
    expect(screen.queryByRole('alertdialog')).toBeNull();
    await user.click(screen.getByRole('button', { name: 'Terminate' }));
    const yes = within(screen.getByRole('alertdialog')).getByRole('button', { name: 'Yes, terminate' });
    expect(yes.className, 'the answer that destroys is red too').toBe('danger');
    await user.click(yes);
    await waitFor(() => expect(finished).toBe(1));
    expect(dialog.isConnected).toBe(false);
    expect(api.requests.map((r) => r.method)).toEqual(['PATCH', 'PATCH']);
    await user.click(screen.getByRole('button', { name: 'Terminate' }));
    await user.click(screen.getByRole('button', { name: 'Yes, terminate' }));
    await waitFor(() => expect(finished).toBe(2));
    expect(resultOf('alpha').textContent).toBe('alphaalready so — already terminated');
    expect(resultOf('beta').textContent).toBe('betaalready so — already terminated');
  });

  it('keeps at most four requests in flight, and retries a 429 after its Retry-After with the same key', async () => {
    const many = Array.from({ length: 10 }, (_, i) => workflow({ id: `00000000-0000-4000-8000-0000000001${String(i).padStart(2, '0')}`, name: `w${i}` }));
    const api = fakeCommands(many, { limited: 2 });
    const waits: number[] = [];
    const results = await runBulk('pause', many, {
      keyFor: (action, id) => `${action}-${id}`,
      onResult: () => {},
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
    expect(results.map((r) => r.outcome)).toEqual(Array(10).fill('done'));
    expect(api.maxInFlight()).toBeLessThanOrEqual(4);
    expect(api.maxInFlight()).toBeGreaterThan(1);
    expect(waits).toEqual([0, 0]);
    expect(api.requests).toHaveLength(12);
    expect(new Set(api.requests.map((r) => r.key)).size).toBe(10);
  });

  it('reads Retry-After in seconds or as a date, within bounds', () => {
    expect(retryAfterMs('2')).toBe(2000);
    expect(retryAfterMs(null)).toBe(1000);
    expect(retryAfterMs('Wed, 02 Dec 2026 00:00:05 GMT', Date.parse('2026-12-02T00:00:00Z'))).toBe(5000);
    expect(retryAfterMs('9999')).toBe(30_000);
    expect(retryAfterMs('soon')).toBe(1000);
  });

  it('selects workflows on the list with the keyboard, all on the page at once, and acts on the selection', async () => {
    const api = fakeCommands(three.slice(0, 2));
    const user = userEvent.setup();
    renderWithProviders(<WorkflowsPage />);
    const all = await screen.findByRole('checkbox', { name: 'Select all on this page' });
    const pause = screen.getByRole('button', { name: 'Pause' });
    expect(pause).toHaveProperty('disabled', true);
    const alpha = screen.getByRole('checkbox', { name: 'Select alpha' });
    alpha.focus();
    await user.keyboard(' ');
    expect(alpha).toHaveProperty('checked', true);
    expect(all).toHaveProperty('indeterminate', true);
    expect(screen.getByText('1 selected')).toBeTruthy();
    all.focus();
    await user.keyboard(' ');
    expect(screen.getByRole('checkbox', { name: 'Select beta' })).toHaveProperty('checked', true);
    expect(screen.getByText('2 selected')).toBeTruthy();
    await user.click(screen.getByRole('button', { name: 'Pause' }));
    await waitFor(() => expect(screen.getByRole('status').textContent).toBe('Pause: 1 done, 1 already so, 0 refused.'));
    expect(api.requests.filter((r) => r.method === 'POST')).toHaveLength(2);
    await user.click(screen.getByRole('button', { name: 'Clear selection' }));
    expect(screen.getByRole('button', { name: 'Pause' })).toHaveProperty('disabled', true);
  });
});
