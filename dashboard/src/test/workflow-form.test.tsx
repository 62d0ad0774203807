import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import { ApiError } from '../api/problem';
import { WorkflowForm } from '../components/workflow-form';
import { valuesFromWorkflow, type WorkflowRequest } from '../components/workflow-payload';
import { workflow } from './factories';

function setup(props: Partial<Parameters<typeof WorkflowForm>[0]> = {}) {
  const onSubmit = vi.fn<(r: WorkflowRequest) => Promise<void>>(async () => {});
  const onCancel = vi.fn();
  render(<WorkflowForm mode="create" onSubmit={onSubmit} onCancel={onCancel} {...props} />);
  return { onSubmit, onCancel, user: userEvent.setup() };
}

const payloadOf = (r: WorkflowRequest | undefined) => JSON.parse(r!.payload) as Record<string, unknown>;

describe('WorkflowForm', () => {
  it('sends a HEARTBEAT workflow with only the fields that were filled in', async () => {
    const { onSubmit, user } = setup();
    await user.type(screen.getByLabelText('Name'), 'Homepage');
    await user.type(screen.getByLabelText('Endpoint URL'), 'https://example.com/health');
    await user.selectOptions(screen.getByLabelText('Method'), 'HEAD');
    await user.type(screen.getByLabelText('Headers'), 'Authorization: Bearer abc{Enter}X-Trace:  1');
    await user.type(screen.getByLabelText('Timeout'), '15s');
    await user.click(screen.getByRole('button', { name: 'Create workflow' }));

    expect(onSubmit).toHaveBeenCalledOnce();
    const request = onSubmit.mock.calls[0]![0];
    expect(request).toMatchObject({ name: 'Homepage', kind: 'HEARTBEAT', interval: 5, max_consecutive_job_failures_allowed: 3 });
    expect(request).not.toHaveProperty('log_retention');
    expect(payloadOf(request)).toEqual({
      endpoint: 'https://example.com/health',
      method: 'HEAD',
      expected_status_code: 200,
      headers: { Authorization: 'Bearer abc', 'X-Trace': '1' },
      timeout: '15s',
    });
  }, 20_000);

  it('switches to the CONTAINER fields and sends the command one argument per line, env and limits', async () => {
    const { onSubmit, user } = setup();
    await user.type(screen.getByLabelText('Name'), 'Nightly');
    await user.selectOptions(screen.getByLabelText('Kind'), 'CONTAINER');
    expect(screen.queryByLabelText('Endpoint URL')).toBeNull();
    await user.type(screen.getByLabelText('Image'), 'alpine:3.20');
    await user.type(screen.getByLabelText('Command'), 'sh{Enter}-c{Enter}echo "a b"');
    await user.type(screen.getByLabelText('Environment'), 'GREETING=hello=world');
    await user.type(screen.getByLabelText('Memory limit (MB)'), '64');
    await user.type(screen.getByLabelText('CPU limit'), '0.5');
    await user.click(screen.getByLabelText('Keep logs'));
    await user.click(screen.getByRole('button', { name: 'Create workflow' }));

    const request = onSubmit.mock.calls[0]![0];
    expect(request).toMatchObject({ kind: 'CONTAINER', log_retention: false });
    expect(payloadOf(request)).toEqual({ image: 'alpine:3.20', cmd: ['sh', '-c', 'echo "a b"'], env: { GREETING: 'hello=world' }, memory_mb: 64, cpus: 0.5 });
  }, 20_000);

  it("shows the api's field errors next to their fields, and the rest above the buttons", async () => {
    const { onSubmit, user } = setup();
    onSubmit.mockRejectedValueOnce(
      new ApiError({
        status: 400,
        code: 'validation_failed',
        detail: 'The request is invalid.',
        errors: [
          { field: 'payload.endpoint', message: 'must be an absolute http or https URL' },
          { field: 'payload.headers.Bad Name', message: 'is not a valid header name' },
          { field: 'interval', message: 'must be at most 10080' },
          { field: 'payload', message: 'must be a string holding a JSON object' },
        ],
      }),
    );
    await user.type(screen.getByLabelText('Name'), 'x');
    // the form finds nothing wrong; the api does
    await user.type(screen.getByLabelText('Endpoint URL'), 'https://nope.example/');
    await user.click(screen.getByRole('button', { name: 'Create workflow' }));

    const endpoint = screen.getByLabelText('Endpoint URL');
    expect(endpoint.getAttribute('aria-invalid')).toBe('true');
    // the first field in error (in form order) has the focus
    expect(document.activeElement).toBe(screen.getByLabelText('Interval (minutes)'));
    expect(document.getElementById(endpoint.getAttribute('aria-describedby')!)!.textContent).toBe('must be an absolute http or https URL');
    expect(screen.getByText('is not a valid header name')).toBeTruthy();
    expect(screen.getByText('must be at most 10080')).toBeTruthy();
    expect(screen.getByRole('alert').textContent).toContain('payload must be a string holding a JSON object');
    // fixing and resubmitting clears them
    onSubmit.mockResolvedValueOnce();
    await user.click(screen.getByRole('button', { name: 'Create workflow' }));
    expect(screen.queryByText('must be at most 10080')).toBeNull();
  });

  it('refuses lines it cannot turn into a request without calling the api', async () => {
    const { onSubmit, user } = setup();
    await user.type(screen.getByLabelText('Headers'), 'no colon here');
    await user.clear(screen.getByLabelText('Interval (minutes)'));
    await user.click(screen.getByRole('button', { name: 'Create workflow' }));
    expect(onSubmit).not.toHaveBeenCalled();
    expect(screen.getByText('each line must be "Name: value"')).toBeTruthy();
    const interval = screen.getByLabelText('Interval (minutes)');
    expect(document.getElementById(`${interval.id}-error`)!.textContent).toBe('is required');
  });

  it('shows every problem at once, in plain words, the image and duration formats included, and follows typing', async () => {
    const { onSubmit, user } = setup();
    await user.selectOptions(screen.getByLabelText('Kind'), 'CONTAINER');
    await user.clear(screen.getByLabelText('Interval (minutes)'));
    await user.type(screen.getByLabelText('Interval (minutes)'), '0');
    await user.clear(screen.getByLabelText('Failures before terminating'));
    await user.type(screen.getByLabelText('Failures before terminating'), '1000');
    await user.type(screen.getByLabelText('Image'), 'Not An Image!');
    await user.type(screen.getByLabelText('Timeout'), '2h');
    await user.click(screen.getByRole('button', { name: 'Create workflow' }));
    expect(onSubmit).not.toHaveBeenCalled();
    const errorOf = (label: string) => {
      const input = screen.getByLabelText(label);
      expect(input.getAttribute('aria-invalid')).toBe('true');
      return document.getElementById(`${input.id}-error`)?.textContent;
    };
    expect(errorOf('Name')).toBe('must not be empty');
    expect(errorOf('Interval (minutes)')).toBe('must be at least 1');
    expect(errorOf('Failures before terminating')).toBe('must be at most 100');
    expect(errorOf('Image')).toBe('must be a valid image reference such as "alpine:3.20"');
    expect(errorOf('Timeout')).toBe('must be at most 3600s');
    // as you type: fixing a field clears its message at once
    await user.clear(screen.getByLabelText('Timeout'));
    await user.type(screen.getByLabelText('Timeout'), '10 minutes');
    expect(errorOf('Timeout')).toBe('must be a positive duration such as "10s" or "1m30s"');
    await user.clear(screen.getByLabelText('Timeout'));
    await user.type(screen.getByLabelText('Timeout'), '10m');
    expect(screen.getByLabelText('Timeout').getAttribute('aria-invalid')).not.toBe('true');
  }, 20_000);

  it('edits a stored CONTAINER workflow: fields filled from its payload, kind fixed', async () => {
    const stored = workflow({
      kind: 'CONTAINER',
      log_retention: true,
      payload: JSON.stringify({ image: 'busybox:1', cmd: ['echo', 'hi'], env: { A: '1' }, timeout: '1m', network: 'bridge' }),
    });
    const { onSubmit, user } = setup({ mode: 'edit', initial: valuesFromWorkflow(stored) });
    expect(screen.queryByLabelText('Kind')).toBeNull();
    expect((screen.getByLabelText('Command') as HTMLTextAreaElement).value).toBe('echo\nhi');
    await user.clear(screen.getByLabelText('Name'));
    await user.type(screen.getByLabelText('Name'), 'Renamed');
    await user.click(screen.getByRole('button', { name: 'Save changes' }));
    const request = onSubmit.mock.calls[0]![0];
    expect(request.name).toBe('Renamed');
    expect(payloadOf(request)).toEqual({ image: 'busybox:1', cmd: ['echo', 'hi'], env: { A: '1' }, timeout: '1m', network: 'bridge' });
  });

  it('sends a cron schedule in a time zone, previewing the next five runs there and in the viewer’s zone', async () => {
    const { onSubmit, user } = setup();
    await user.type(screen.getByLabelText('Name'), 'Mornings');
    await user.type(screen.getByLabelText('Endpoint URL'), 'https://example.com/health');
    await user.selectOptions(screen.getByLabelText('Runs'), 'cron');
    expect(screen.queryByLabelText('Interval (minutes)')).toBeNull();
    await user.type(screen.getByLabelText('Cron expression'), '30 9 * * MON-FRI');
    await user.clear(screen.getByLabelText('Time zone'));
    await user.type(screen.getByLabelText('Time zone'), 'Asia/Kolkata');
    const preview = screen.getByRole('table', { name: 'Next runs' });
    const rows = preview.querySelectorAll('tbody tr');
    expect(rows).toHaveLength(5);
    for (const row of rows) expect(row.querySelector('td')!.textContent).toMatch(/09:30/);
    await user.clear(screen.getByLabelText('Jitter (seconds)'));
    await user.type(screen.getByLabelText('Jitter (seconds)'), '120');
    await user.click(screen.getByRole('button', { name: 'Create workflow' }));
    const request = onSubmit.mock.calls[0]![0];
    expect(request).toMatchObject({ cron: '30 9 * * MON-FRI', timezone: 'Asia/Kolkata', jitter_seconds: 120 });
    expect(request).not.toHaveProperty('interval');
  }, 20_000);

  it('sends the run policy chosen (defaults otherwise), and shows a workflow\'s own on edit', async () => {
    const { onSubmit, user } = setup();
    await user.type(screen.getByLabelText('Name'), 'Nightly');
    await user.type(screen.getByLabelText('Endpoint URL'), 'https://example.com/health');
    expect(screen.getByLabelText<HTMLSelectElement>('When a run is still going at the next time').value).toBe('run_after');
    await user.selectOptions(screen.getByLabelText('When a run is still going at the next time'), 'skip');
    await user.selectOptions(screen.getByLabelText('After orloj was down'), 'none');
    await user.selectOptions(screen.getByLabelText('First run'), 'now');
    await user.click(screen.getByRole('button', { name: 'Create workflow' }));
    expect(onSubmit.mock.calls[0]![0]).toMatchObject({ overlap_policy: 'skip', catch_up_policy: 'none', first_run: 'now' });
    const edited = valuesFromWorkflow(workflow({ overlap_policy: 'skip', catch_up_policy: 'latest', first_run: 'now' }));
    expect([edited.overlapPolicy, edited.catchUpPolicy, edited.firstRun]).toEqual(['skip', 'latest', 'now']);
    const older = valuesFromWorkflow(workflow({}));
    expect([older.overlapPolicy, older.catchUpPolicy, older.firstRun]).toEqual(['run_after', 'latest', 'at_first_slot']);
  }, 20_000);

  it('names a bad time zone or a cron expression without five fields before sending', async () => {
    const { onSubmit, user } = setup();
    await user.selectOptions(screen.getByLabelText('Runs'), 'cron');
    await user.type(screen.getByLabelText('Cron expression'), '* * *');
    await user.clear(screen.getByLabelText('Time zone'));
    await user.type(screen.getByLabelText('Time zone'), 'Mars/Olympus');
    await user.click(screen.getByRole('button', { name: 'Create workflow' }));
    expect(onSubmit).not.toHaveBeenCalled();
    expect(document.getElementById('wf-cron-error')!.textContent).toMatch(/five fields/);
    expect(document.getElementById('wf-timezone-error')!.textContent).toMatch(/IANA/);
  }, 20_000);

  it('can be filled and sent with the keyboard alone', async () => {
    const { onSubmit, user } = setup();
    screen.getByLabelText('Name').focus();
    await user.keyboard('Kb');
    await user.tab(); // kind
    await user.tab(); // failures
    await user.tab(); // schedule: every N minutes
    await user.tab(); // interval
    await user.tab(); // jitter
    await user.tab(); // overlap policy
    await user.tab(); // catch-up policy
    await user.tab(); // first run
    await user.tab(); // endpoint
    await user.keyboard('https://example.com/{Enter}');
    expect(onSubmit).toHaveBeenCalledOnce();
    expect(payloadOf(onSubmit.mock.calls[0]![0]).endpoint).toBe('https://example.com/');
  });
});
