import { act, fireEvent, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { useState } from 'react';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { LogEntry, LogPage } from '../api/client';
import type { LogFilters, LogSource, TailHandlers } from '../components/log-source';
import { LogViewer } from '../components/log-viewer';
import { logEntry, logPage } from './factories';
import { renderWithProviders } from './render';

const TOKEN = '0123456789abcdef0123456789abcdef';
/** A match as the api marks it in a search result (the reference implementation's markers). */
const hl = (match: string) => `__CV_HL_START_${TOKEN}__${match}__CV_HL_END_${TOKEN}__`;

function fakeSource(pages: (filters: LogFilters, cursor: string) => LogPage, all: LogEntry[] = []) {
  let handlers: TailHandlers | undefined;
  const stop = vi.fn();
  const source: LogSource = {
    page: vi.fn(async (filters: LogFilters, cursor: string) => pages(filters, cursor)),
    lines: vi.fn(async (from: number, limit: number) => ({ id: 'job', workflow_id: 'wf', from, total: all.length, logs: all.slice(from, from + limit) })),
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

/**
 * jsdom lays nothing out: give the scrolling log box a size, rows a height and
 * elements a working scroll position, so the virtualizer has something to place.
 */
function fakeLayout() {
  const tops = new WeakMap<Element, number>();
  const saved = (['clientHeight', 'clientWidth', 'offsetHeight', 'scrollHeight'] as const).map((k) => [k, Object.getOwnPropertyDescriptor(HTMLElement.prototype, k)] as const);
  const savedTop = Object.getOwnPropertyDescriptor(Element.prototype, 'scrollTop');
  const savedTo = Object.getOwnPropertyDescriptor(Element.prototype, 'scrollTo');
  beforeAll(() => {
    const box = (el: Element) => el.classList.contains('log-scroll');
    Object.defineProperty(HTMLElement.prototype, 'clientHeight', { configurable: true, get: function (this: HTMLElement) { return box(this) ? 400 : 0; } });
    Object.defineProperty(HTMLElement.prototype, 'clientWidth', { configurable: true, get: function (this: HTMLElement) { return box(this) ? 800 : 0; } });
    Object.defineProperty(HTMLElement.prototype, 'scrollHeight', {
      configurable: true,
      get: function (this: HTMLElement) {
        return box(this) ? parseFloat((this.firstElementChild as HTMLElement | null)?.style.height ?? '0') || 0 : 0;
      },
    });
    Object.defineProperty(HTMLElement.prototype, 'offsetHeight', { configurable: true, get: function (this: HTMLElement) { return this.classList.contains('log-line') ? 20 : 0; } });
    Object.defineProperty(Element.prototype, 'scrollTop', {
      configurable: true,
      get: function (this: Element) { return tops.get(this) ?? 0; },
      set: function (this: Element, v: number) { tops.set(this, v); },
    });
    Object.defineProperty(Element.prototype, 'scrollTo', {
      configurable: true,
      value: function (this: Element, o: ScrollToOptions) {
        tops.set(this, o.top ?? 0);
        this.dispatchEvent(new Event('scroll'));
      },
    });
  });
  afterAll(() => {
    for (const [k, d] of saved) {
      if (d) Object.defineProperty(HTMLElement.prototype, k, d);
      else delete (HTMLElement.prototype as Partial<Record<typeof k, number>>)[k];
    }
    if (savedTop) Object.defineProperty(Element.prototype, 'scrollTop', savedTop);
    if (savedTo) Object.defineProperty(Element.prototype, 'scrollTo', savedTo);
    else delete (Element.prototype as Partial<Element>).scrollTo;
  });
}

describe('LogViewer', () => {
  fakeLayout();

  it('expands a JSON line on demand and shows times since the first line when asked', async () => {
    const { source } = fakeSource(() => logPage([]), [logEntry(0, 'plain start'), logEntry(1, 'second'), logEntry(2, '{"level":"info","msg":"ready","n":[1,2]}')]);
    const user = userEvent.setup();
    view(source);
    const log = await screen.findByLabelText('Log');
    const toggle = await within(log).findByRole('button', { name: 'Expand JSON' });
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
    expect(times()).toEqual(['+0.000s', '+1.000s', '+2.000s']);
  });

  it('reads a finished log as one scroll by position, a block at a time, and jumps to a line', async () => {
    const all = Array.from({ length: 1200 }, (_, i) => logEntry(i, `line ${i}`));
    const { source } = fakeSource(() => logPage([]), all);
    const user = userEvent.setup();
    view(source);
    const log = await screen.findByLabelText('Log');
    await screen.findByText('1,200 lines', { exact: false });
    // Only the first block was asked for, then the ones in view; never the whole log in one go.
    await waitFor(() => expect(source.lines).toHaveBeenCalledWith(1000, 500));
    expect(vi.mocked(source.lines).mock.calls.every(([, limit]) => limit === 500)).toBe(true);
    expect(log.querySelectorAll('li.log-line').length).toBeLessThan(200);

    await user.type(screen.getByLabelText('Line'), '1200');
    await user.click(screen.getByRole('button', { name: 'Go' }));
    expect(screen.getByText('Enter a line number from 0 to 1199.')).toBeTruthy();
    await user.clear(screen.getByLabelText('Line'));
    await user.type(screen.getByLabelText('Line'), '600');
    await user.click(screen.getByRole('button', { name: 'Go' }));
    await waitFor(() => expect(log.querySelector('li[aria-current="true"]')?.textContent).toContain('line 600'));
    expect(source.lines).toHaveBeenCalledWith(500, 500);
  });

  it('searches with a stream filter and highlights the matches the api marked with highlight_token, as text, never as HTML', async () => {
    const { source } = fakeSource((filters) =>
      filters.q
        ? logPage([logEntry(5, `<img src=x onerror=alert(1)> ${hl('Needle')} and ${hl('needle')} __CV_HL_START_ alone`, 'stderr')], '', TOKEN)
        : logPage([]),
      [logEntry(0, 'plain')],
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
    expect(results.textContent).toContain('<img src=x onerror=alert(1)> Needle and needle __CV_HL_START_ alone');
    expect(results.textContent).not.toContain(TOKEN);
    // downloads carry the same filters
    expect(screen.getByRole('link', { name: 'Download .jsonl' }).getAttribute('href')).toBe('/raw?format=jsonl&q=needle&stream=stderr');

    await user.click(screen.getByRole('button', { name: 'Clear' }));
    await screen.findByText('plain');
  });

  it('reads a JSON search result without its markers: collapsed the match is marked, expanded it shows as stored', async () => {
    const { source } = fakeSource((filters) => (filters.q ? logPage([logEntry(3, `{"level":"${hl('error')}","n":1}`)], '', TOKEN) : logPage([])), [logEntry(0, 'plain')]);
    const user = userEvent.setup();
    view(source);
    await screen.findByText('plain');
    await user.type(screen.getByLabelText('Search'), 'error');
    await user.click(screen.getByRole('button', { name: 'Search' }));
    const results = await screen.findByLabelText('Matching log lines');
    expect(within(results).getByText('error', { selector: 'mark' })).toBeTruthy();
    await user.click(within(results).getByRole('button', { name: 'Expand JSON' }));
    expect(results.querySelector('pre.log-json')?.textContent).toBe(JSON.stringify({ level: 'error', n: 1 }, null, 2));
    expect(results.textContent).not.toContain(TOKEN);
  });

  /** A 900-line log whose line 700 is the one hit of a search for "needle", opened in context from the results. */
  async function needleInContext() {
    const all = Array.from({ length: 900 }, (_, i) => logEntry(i, i === 700 ? 'the needle' : `line ${i}`));
    const { source } = fakeSource((filters) => (filters.q ? logPage([{ ...all[700]!, message: `the ${hl('needle')}` }], '', TOKEN) : logPage([])), all);
    const user = userEvent.setup();
    view(source);
    await user.type(screen.getByLabelText('Search'), 'needle');
    await user.click(screen.getByRole('button', { name: 'Search' }));
    await screen.findByLabelText('Matching log lines');
    await user.click(screen.getByRole('button', { name: 'Show line 700 in context' }));
    return { source, user };
  }

  it('opens a search hit in context: the whole log around the hit, the hit marked', async () => {
    await needleInContext();
    const log = await screen.findByLabelText('Log');
    await waitFor(() => expect(log.querySelector('li[aria-current="true"]')?.textContent).toContain('the needle'));
    expect(within(log).getByText('line 699')).toBeTruthy();
    expect(within(log).getByText('line 701')).toBeTruthy();
  });

  it('keeps the term of a search a hit was opened from, says so, and leads back to its results', async () => {
    const { source, user } = await needleInContext();
    await screen.findByLabelText('Log');
    // The box keeps the term, and the bar above the log says what it is: the search the hit came from.
    expect((screen.getByLabelText('Search') as HTMLInputElement).value).toBe('needle');
    expect(screen.getByRole('status').textContent).toBe('Line 700 in context, from the search for “needle”.Back to results');
    expect(screen.queryByRole('button', { name: 'Clear' })).toBeNull();
    expect(screen.queryByLabelText('Matching log lines')).toBeNull();

    // Back: the same results, the term still in the box, the bar gone.
    await user.clear(screen.getByLabelText('Search'));
    await user.type(screen.getByLabelText('Search'), 'edited');
    await user.click(screen.getByRole('button', { name: 'Back to results' }));
    await screen.findByLabelText('Matching log lines');
    expect(source.page).toHaveBeenLastCalledWith({ q: 'needle' }, '');
    expect((screen.getByLabelText('Search') as HTMLInputElement).value).toBe('needle');
    expect(screen.queryByRole('status')).toBeNull();

    // Opened again, then an empty search: the whole log, no term anywhere.
    await user.click(screen.getByRole('button', { name: 'Show line 700 in context' }));
    await screen.findByRole('status');
    await user.clear(screen.getByLabelText('Search'));
    await user.click(screen.getByRole('button', { name: 'Search' }));
    await waitFor(() => expect(screen.queryByRole('status')).toBeNull());
    expect(screen.getByLabelText('Log')).toBeTruthy();
    expect(screen.queryByRole('button', { name: 'Clear' })).toBeNull();
  });

  it('offers txt, json and jsonl downloads only once the job is finished', async () => {
    const { source } = fakeSource(() => logPage([]));
    view(source, { terminal: false });
    expect(screen.queryByRole('link', { name: /Download/ })).toBeNull();
    await screen.findByText('No output');
    view(source, { terminal: true });
    expect(screen.getAllByRole('link', { name: /Download/ })).toHaveLength(3);
  });

  it('follows a running job live: appends lines once each, then hands over when it ends', async () => {
    const { source, stop, tail } = fakeSource(() => logPage([]));
    const onEnded = vi.fn();
    const onFirstLine = vi.fn();
    const { unmount } = view(source, { live: true, terminal: false, onEnded, onFirstLine });
    expect(source.tail).toHaveBeenCalledWith(undefined, expect.anything());
    expect(screen.getByText('No output yet.')).toBeTruthy();
    await act(async () => {
      tail().onLog(logEntry(0, 'first'));
      tail().onLog(logEntry(1, 'second', 'stderr'));
      tail().onLog(logEntry(1, 'second', 'stderr')); // a replay after reconnecting
      // Lines are added once per animation frame.
      await new Promise((r) => requestAnimationFrame(r));
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

  /**
   * A job's log as the job page shows it: live until the tail ends, then the finished log. 100 lines
   * arrive; `tail` sends more, `relayout` moves the live box the way a relayout does (a scroll event
   * away from the bottom that no reader made), `end` ends the job.
   */
  async function followed() {
    const all = Array.from({ length: 150 }, (_, i) => logEntry(i, `line ${i}`));
    const { source, tail } = fakeSource(() => logPage([]), all);
    function JobLog() {
      const [ended, setEnded] = useState(false);
      return <LogViewer source={source} live={!ended} terminal={ended} queryKey={['logs', 'followed']} onEnded={() => setEnded(true)} />;
    }
    renderWithProviders(<JobLog />);
    const send = async (from: number, to: number) => {
      await act(async () => {
        for (let i = from; i < to; i++) tail().onLog(all[i]!);
        await new Promise((r) => requestAnimationFrame(r));
      });
    };
    await send(0, 100);
    const live = screen.getByLabelText('Live log');
    const atBottom = () => live.scrollHeight - live.scrollTop - live.clientHeight < 40;
    expect(atBottom()).toBe(true);
    const scrollTo = (top: number) =>
      act(() => {
        live.scrollTop = top;
        live.dispatchEvent(new Event('scroll'));
      });
    return { live, atBottom, send, scrollTo, end: () => act(() => tail().onEnd()) };
  }

  it('keeps a reader who follows the bottom there when a resized window moves the box, and opens the finished log at its end', async () => {
    const { live, atBottom, send, scrollTo, end } = await followed();
    // The window is resized (a phone turned, a full-page screenshot): the lines rewrap, and the relayout leaves the box near line 30.
    act(() => {
      window.dispatchEvent(new Event('resize'));
    });
    scrollTo(600);
    expect(atBottom()).toBe(true);
    await send(100, 150);
    expect(atBottom()).toBe(true);
    expect(within(live).getByText('line 149')).toBeTruthy();
    end();
    const log = await screen.findByLabelText('Log');
    expect(await within(log).findByText('line 149')).toBeTruthy();
  });

  it('stops following once the reader scrolls away, after a resize too, and opens the finished log where they were', async () => {
    const { live, atBottom, send, scrollTo, end } = await followed();
    act(() => {
      window.dispatchEvent(new Event('resize'));
    });
    fireEvent.wheel(live, { deltaY: -1000 });
    scrollTo(600);
    await send(100, 150);
    expect(live.scrollTop).toBe(600);
    expect(atBottom()).toBe(false);
    end();
    const log = await screen.findByLabelText('Log');
    await waitFor(() => expect(within(log).getAllByText(/^line \d+$/).length).toBeGreaterThan(0));
    expect(within(log).queryByText('line 149')).toBeNull();
  });

  it('starts a new attempt at its line 0 and says so, never splicing it onto the old one', async () => {
    const { source, tail } = fakeSource(() => logPage([]));
    renderWithProviders(<LogViewer source={source} live terminal={false} queryKey={['logs', 'attempts']} onEnded={() => {}} attempt={1} />);
    expect(source.tail).toHaveBeenCalledWith(1, expect.anything());
    await act(async () => {
      for (let i = 0; i < 45; i++) tail().onLog(logEntry(i, `old ${i}`));
      await new Promise((r) => requestAnimationFrame(r));
    });
    await act(async () => {
      tail().onAttempt?.(2);
      for (let i = 0; i < 3; i++) tail().onLog({ ...logEntry(i, `new ${i}`), event_id: `job:2:${i}` });
      await new Promise((r) => requestAnimationFrame(r));
    });
    const live = screen.getByLabelText('Live log');
    expect(within(live).getAllByText(/^(old|new) \d+$/).map((e) => e.textContent)).toEqual(['new 0', 'new 1', 'new 2']);
    expect(screen.getByRole('status').textContent).toContain('Attempt 2 started: its log starts at line 0');
  });

  it('keeps the live box one height while lines arrive, so that what is under it stays where it was', async () => {
    const { source, tail } = fakeSource(() => logPage([]));
    view(source, { live: true, terminal: false });
    const live = screen.getByLabelText('Live log');
    const height = live.style.height;
    expect(height).not.toBe('');
    for (let n = 0; n < 30; n += 5) {
      await act(async () => {
        for (let i = n; i < n + 5; i++) tail().onLog(logEntry(i, `line ${i}`));
        await new Promise((r) => requestAnimationFrame(r));
      });
      expect(within(live).getByText(`line ${n + 4}`)).toBeTruthy();
      expect(live.style.height).toBe(height);
    }
  });

  it("shows the api's reason when the live log is refused", () => {
    const { source, tail } = fakeSource(() => logPage([]));
    view(source, { live: true, terminal: false });
    act(() => tail().onError('This workflow does not keep logs.'));
    expect(screen.getByRole('status').textContent).toContain('This workflow does not keep logs.');
  });
});
