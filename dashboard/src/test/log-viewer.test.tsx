import { act, screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import type { LogPage } from '../api/client';
import type { LogFilters, LogSource, TailHandlers } from '../components/log-source';
import { LogViewer } from '../components/log-viewer';
import { logEntry, logPage } from './factories';
import { renderWithProviders } from './render';

const TOKEN = '0123456789abcdef0123456789abcdef';

function fakeSource(pages: (filters: LogFilters, cursor: string) => LogPage) {
  let handlers: TailHandlers | undefined;
  const stop = vi.fn();
  const source: LogSource = {
    page: vi.fn(async (filters: LogFilters, cursor: string) => pages(filters, cursor)),
    tail: vi.fn((_since: number | undefined, h: TailHandlers) => {
      handlers = h;
      return stop;
    }),
    rawUrl: (format, filters) => `/raw?format=${format}&q=${filters.q ?? ''}&stream=${filters.stream ?? ''}`,
  };
  return { source, stop, tail: () => handlers! };
}

const view = (source: LogSource, props: { live?: boolean; terminal?: boolean; onEnded?: () => void; onFirstLine?: () => void } = {}) =>
  renderWithProviders(
    <LogViewer
      source={source}
      live={props.live ?? false}
      terminal={props.terminal ?? true}
      queryKey={['logs', Math.random()]}
      onEnded={props.onEnded ?? (() => {})}
      onFirstLine={props.onFirstLine}
    />,
  );

describe('LogViewer', () => {
  it('expands a JSON line on demand and shows times since the first line when asked', async () => {
    const { source } = fakeSource(() => logPage([logEntry(2, '{"level":"info","msg":"ready","n":[1,2]}'), logEntry(0, 'plain start')]));
    const user = userEvent.setup();
    view(source);
    const log = await screen.findByLabelText('Log');
    const toggle = within(log).getByRole('button', { name: 'Expand JSON' });
    expect(toggle.getAttribute('aria-expanded')).toBe('false');
    await user.click(toggle);
    const pretty = log.querySelector('pre.log-json')!;
    expect(pretty.textContent).toBe(JSON.stringify({ level: 'info', msg: 'ready', n: [1, 2] }, null, 2));
    await user.click(within(log).getByRole('button', { name: 'Collapse JSON' }));
    expect(log.querySelector('pre.log-json')).toBeNull();
    expect(within(log).queryAllByRole('button')).toHaveLength(1);

    const times = () => [...log.querySelectorAll('time.log-time')].map((t) => t.textContent);
    expect(times().every((t) => /^\d\d:\d\d:\d\d\.\d{3}$/.test(t ?? ''))).toBe(true);
    await user.selectOptions(screen.getByLabelText('Times'), 'relative');
    expect(times()).toEqual(['+0.000s', '+2.000s']);
  });

  it('pages through a finished log oldest first, loading older pages above', async () => {
    const { source } = fakeSource((_f, cursor) =>
      cursor === '' ? logPage([logEntry(3, 'four'), logEntry(2, 'three')], 'c1') : logPage([logEntry(1, 'two'), logEntry(0, 'one')]),
    );
    view(source);
    const log = await screen.findByLabelText('Log');
    expect(within(log).getAllByText(/^(one|two|three|four)$/).map((e) => e.textContent)).toEqual(['three', 'four']);
    await userEvent.click(screen.getByRole('button', { name: 'Load older lines' }));
    await screen.findByText('one');
    expect(within(log).getAllByText(/^(one|two|three|four)$/).map((e) => e.textContent)).toEqual(['one', 'two', 'three', 'four']);
    expect(screen.queryByRole('button', { name: 'Load older lines' })).toBeNull();
  });

  it('searches with a stream filter and highlights matches from highlight_token as text, never as HTML', async () => {
    const { source } = fakeSource((filters) =>
      filters.q
        ? logPage([logEntry(5, `<img src=x onerror=alert(1)> ${TOKEN}Needle${TOKEN} and ${TOKEN}needle${TOKEN}`, 'stderr')], '', TOKEN)
        : logPage([logEntry(0, 'plain')]),
    );
    const user = userEvent.setup();
    view(source);
    await screen.findByText('plain');
    await user.type(screen.getByLabelText('Search'), 'needle');
    await user.selectOptions(screen.getByLabelText('Stream'), 'stderr');
    await user.click(screen.getByRole('button', { name: 'Search' }));

    const results = await screen.findByLabelText('Matching log lines');
    expect(source.page).toHaveBeenLastCalledWith({ q: 'needle', stream: 'stderr' }, '');
    const marks = within(results).getAllByText(/needle/i, { selector: 'mark' });
    expect(marks.map((m) => m.textContent)).toEqual(['Needle', 'needle']);
    expect(results.querySelector('img')).toBeNull();
    expect(results.textContent).toContain('<img src=x onerror=alert(1)> Needle and needle');
    expect(results.textContent).not.toContain(TOKEN);
    // downloads carry the same filters
    expect(screen.getByRole('link', { name: 'Download .jsonl' }).getAttribute('href')).toBe('/raw?format=jsonl&q=needle&stream=stderr');

    await user.click(screen.getByRole('button', { name: 'Clear' }));
    await screen.findByText('plain');
  });

  it('offers txt, json and jsonl downloads only once the job is finished', async () => {
    const { source } = fakeSource(() => logPage([]));
    view(source, { terminal: false });
    expect(screen.queryByRole('link', { name: /Download/ })).toBeNull();
    await screen.findByText('No output');
  });

  it('follows a running job live: appends lines once each, then hands over when it ends', async () => {
    const { source, stop, tail } = fakeSource(() => logPage([]));
    const onEnded = vi.fn();
    const onFirstLine = vi.fn();
    const { unmount } = view(source, { live: true, terminal: false, onEnded, onFirstLine });
    expect(source.tail).toHaveBeenCalledWith(undefined, expect.anything());
    expect(screen.getByText('No output yet.')).toBeTruthy();
    act(() => {
      tail().onLog(logEntry(0, 'first'));
      tail().onLog(logEntry(1, 'second', 'stderr'));
      tail().onLog(logEntry(1, 'second', 'stderr')); // a replay after reconnecting
    });
    const live = screen.getByLabelText('Live log');
    expect(within(live).getAllByText(/^(first|second)$/).map((e) => e.textContent)).toEqual(['first', 'second']);
    expect(onFirstLine).toHaveBeenCalledOnce();
    expect(screen.getByRole('status').textContent).toContain('Live: new lines appear');
    act(() => tail().onEnd());
    expect(onEnded).toHaveBeenCalledOnce();
    unmount();
    expect(stop).toHaveBeenCalled();
  });

  it("shows the api's reason when the live log is refused", () => {
    const { source, tail } = fakeSource(() => logPage([]));
    view(source, { live: true, terminal: false });
    act(() => tail().onError('This workflow does not keep logs.'));
    expect(screen.getByRole('status').textContent).toContain('This workflow does not keep logs.');
  });
});
