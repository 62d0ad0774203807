import { screen, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import type { JobAttempt } from '../api/client';
import { AttemptsSection } from '../components/job-attempts';
import { renderWithProviders } from './render';

const given: JobAttempt = {
  attempt: 1,
  outcome: 'RETRIED',
  runner_id: 'runner-a',
  started_at: '2026-11-01T10:00:00.000Z',
  ended_at: '2026-11-01T10:00:30.000Z',
  reason: { code: 'lease_lost', message: "Runner runner-a stopped renewing the attempt's lease." },
  log_lines: 45,
};
const current: JobAttempt = { attempt: 2, outcome: 'RUNNING', runner_id: 'runner-b', started_at: '2026-11-01T10:00:40.000Z', log_lines: 12 };

describe('AttemptsSection', () => {
  it('lists each attempt with why it was retried and a link to its own log', () => {
    renderWithProviders(<AttemptsSection attempts={[given, current]} shown={undefined} />);
    const rows = within(screen.getByRole('table', { name: 'Attempts, oldest first' })).getAllByRole('row').slice(1);
    expect(rows).toHaveLength(2);
    expect(rows[0]!.textContent).toContain("its runner stopped responding: Runner runner-a stopped renewing the attempt's lease.");
    expect(within(rows[0]!).getByRole('link', { name: "Attempt 1's log (45 lines)" }).getAttribute('href')).toBe('/?attempt=1');
    expect(within(rows[1]!).getByText('Shown (12 lines)')).toBeTruthy();
  });

  it('marks the attempt whose log is shown, and lists nothing for a job that ran once', () => {
    const { unmount } = renderWithProviders(<AttemptsSection attempts={[given, current]} shown={1} />);
    const rows = within(screen.getByRole('table', { name: 'Attempts, oldest first' })).getAllByRole('row').slice(1);
    expect(within(rows[0]!).getByText('Shown (45 lines)')).toBeTruthy();
    expect(within(rows[1]!).getByRole('link', { name: "Attempt 2's log (12 lines)" })).toBeTruthy();
    unmount();
    renderWithProviders(<AttemptsSection attempts={[current]} shown={undefined} />);
    expect(screen.queryByRole('table')).toBeNull();
  });
});
