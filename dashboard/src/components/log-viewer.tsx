/**
 * A job's log on screen: the views of one viewer (a finished log's scroll,
 * the live tail, search pages with highlights) and its filter bar. The lines
 * and their virtualized rows are log-lines.tsx's; where the lines come from is
 * LogSource's (log-source.ts).
 */
import { useInfiniteQuery } from '@tanstack/react-query';
import { useCallback, useEffect, useLayoutEffect, useRef, useState, type FormEvent, type KeyboardEvent } from 'react';
import { EmptyState, Spinner } from './badges';
import { SelectField, TextField } from './fields';
import type { LogFilters, LogSource, LogStream } from './log-source';
import { BLOCK, boxHeight, LogLines, useExpanded, useFitToFirstScreen, useLineBlocks, useLogVirtualizer, VirtualRows, type Line, type LogAnchor, type TimeMode } from './log-lines';

export type { LogAnchor, TimeMode } from './log-lines';

/** Lines kept in memory while tailing; older ones stay readable through the pages once the job ends. */
const LIVE_LIMIT = 20_000;

/**
 * The live log's box is as tall as it will get from the start, not as tall as its
 * lines: grown a line at a time, it moved what is under it (the attempts and their
 * links) a line down four times a second, and a click pressed on a link was
 * released beside it and went nowhere.
 */
const LIVE_BOX = { height: '60vh' } as const;


/**
 * A finished log as one continuous scroll over every line, virtualized: only
 * the rows in view (and a few around them) are in the page, and only the
 * blocks of lines around them in memory. Opens at `anchor`; jumps to the
 * start, the end or any line.
 */
function LogScroll({ source, anchorRef, mark, mode }: { source: LogSource; anchorRef: { readonly current: LogAnchor }; mark: number | undefined; mode: TimeMode }) {
  const box = useRef<HTMLDivElement>(null);
  const { total, origin, error, load, line } = useLineBlocks(source);
  const [expanded, toggle] = useExpanded();
  const [marked, setMarked] = useState<number | undefined>(mark);
  const [target, setTarget] = useState('');
  const [targetError, setTargetError] = useState<string>();
  const count = total ?? 0;
  useFitToFirstScreen(box, total !== undefined);
  const virtualizer = useLogVirtualizer(box, count);

  useEffect(() => load(0), [load]);

  const go = useCallback(
    (to: LogAnchor) => {
      if (count === 0) return;
      if ('end' in to) virtualizer.scrollToEnd();
      else virtualizer.scrollToIndex(Math.min(to.line, count - 1), { align: to.align });
    },
    [count, virtualizer],
  );
  // Placed once, when the length is known.
  const placed = useRef(false);
  useLayoutEffect(() => {
    if (placed.current || total === undefined) return;
    placed.current = true;
    go(anchorRef.current);
  }, [total, go, anchorRef]);

  const items = virtualizer.getVirtualItems();
  const first = items[0]?.index;
  const last = items[items.length - 1]?.index;
  useEffect(() => {
    if (first === undefined || last === undefined) return;
    for (let b = Math.floor(first / BLOCK); b <= Math.floor(last / BLOCK); b++) load(b);
  }, [first, last, load]);

  if (total === undefined) return error ? <p className="error-text">{error}</p> : <Spinner label="Loading log…" />;

  const jump = (e: FormEvent) => {
    e.preventDefault();
    const n = Number(target);
    if (target.trim() === '' || !Number.isInteger(n) || n < 0 || n >= count) {
      setTargetError(count ? `Enter a line number from 0 to ${count - 1}.` : 'The log has no lines.');
      return;
    }
    setTargetError(undefined);
    setMarked(n);
    go({ line: n, align: 'center' });
  };
  const keys = (e: KeyboardEvent) => {
    if (e.target !== e.currentTarget) return;
    if (e.key === 'Home') go({ line: 0, align: 'start' });
    else if (e.key === 'End') go({ end: true });
    else return;
    e.preventDefault();
  };
  return (
    <>
      <div className="row log-jump">
        <button type="button" className="secondary" onClick={() => go({ line: 0, align: 'start' })} disabled={!count}>
          Start
        </button>
        <button type="button" className="secondary" onClick={() => go({ end: true })} disabled={!count}>
          End
        </button>
        <form className="row log-goto" onSubmit={jump} aria-label="Go to a line">
          <TextField id="log-line" label="Line" inputMode="numeric" value={target} onChange={setTarget} error={targetError} />
          <button type="submit" className="secondary" disabled={!count}>
            Go
          </button>
        </form>
      </div>
      {error ? (
        <p className="error-text" role="alert">
          {error}
        </p>
      ) : null}
      <div className="log-box log-scroll" ref={box} tabIndex={0} aria-label="Log" onKeyDown={keys} style={boxHeight(virtualizer, count)}>
        {count === 0 ? (
          <EmptyState title="No output" />
        ) : (
          <VirtualRows virtualizer={virtualizer} line={line} mode={mode} origin={origin} expanded={expanded} onToggle={toggle} marked={marked} />
        )}
      </div>
      <p className="muted">
        {count.toLocaleString()} line{count === 1 ? '' : 's'}
        {first !== undefined && last !== undefined && count ? ` · showing ${first}–${last}` : ''}
      </p>
    </>
  );
}

/** The line at the top of a live log box, or its end when the reader follows the bottom. */
function readerPosition(el: HTMLElement, atBottom: boolean): LogAnchor {
  const rows = el.querySelectorAll<HTMLElement>('li.log-line');
  if (!rows.length || atBottom) return { end: true };
  // The first row whose bottom is below the top of the box (rows are in order: binary search).
  const top = el.getBoundingClientRect().top;
  let lo = 0;
  let hi = rows.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (rows[mid]!.getBoundingClientRect().bottom <= top) lo = mid + 1;
    else hi = mid;
  }
  const seq = Number(rows[lo]!.querySelector('.log-seq')?.textContent);
  return Number.isInteger(seq) ? { line: seq, align: 'start' } : { end: true };
}

interface LiveCallbacks {
  onEnded: () => void;
  onFirstLine?: (() => void) | undefined;
  onAttempt?: ((attempt: number) => void) | undefined;
}

/**
 * The lines of the job's live tail, from `attempt` on (the newest LIVE_LIMIT),
 * whether lines came, the api's refusal, and the attempt that started while
 * the page followed (its lines replace the old attempt's, never spliced).
 */
function useLiveLines(source: LogSource, attempt: number | undefined, callbacks: LiveCallbacks) {
  const [lines, setLines] = useState<Line[]>([]);
  const [error, setError] = useState<string>();
  const [connected, setConnected] = useState(false);
  const [switched, setSwitched] = useState<number>();
  const latest = useRef(callbacks);
  const startAttempt = useRef(attempt);
  useEffect(() => {
    latest.current = callbacks;
  });

  useEffect(() => {
    let last = -1;
    // Lines are added once per animation frame, however many arrived: a fast log costs one render a frame, not one a line.
    let batch: Line[] = [];
    let frame: number | undefined;
    const flush = () => {
      frame = undefined;
      if (!batch.length) return;
      const add = batch;
      batch = [];
      setLines((old) => {
        const next = old.concat(add);
        return next.length > LIVE_LIMIT ? next.slice(next.length - LIVE_LIMIT) : next;
      });
    };
    const stop = source.tail(startAttempt.current, {
      onLog(entry) {
        setConnected(true);
        if (entry.sequence_num <= last) return;
        if (last === -1) latest.current.onFirstLine?.();
        last = entry.sequence_num;
        batch.push(entry);
        frame ??= requestAnimationFrame(flush);
      },
      onAttempt(n) {
        // A new attempt numbers its lines from 0 again: its log replaces the old one's here.
        if (frame !== undefined) cancelAnimationFrame(frame);
        frame = undefined;
        batch = [];
        last = -1;
        setLines([]);
        setSwitched(n);
        latest.current.onAttempt?.(n);
      },
      onEnd: () => {
        flush();
        latest.current.onEnded();
      },
      onError: setError,
    });
    return () => {
      if (frame !== undefined) cancelAnimationFrame(frame);
      stop();
    };
  }, [source]);
  return { lines, error, connected, switched };
}

/** Follows a running job's log, keeping to the bottom while the reader is there. */
function LiveLog({
  source,
  attempt,
  mode,
  onPosition,
  ...callbacks
}: LiveCallbacks & {
  source: LogSource;
  /** The job's current attempt as the page knows it (undefined: not known). */
  attempt: number | undefined;
  mode: TimeMode;
  /** Where the reader is (told as they scroll), for the finished view to open at the same place. */
  onPosition: (at: LogAnchor) => void;
}) {
  const { lines, error, connected, switched } = useLiveLines(source, attempt, callbacks);
  const box = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  // The window was resized while the reader followed the bottom, and the reader has not wheeled, touched, clicked or typed in the box since.
  const relayout = useRef(false);

  const [expanded, toggle] = useExpanded();
  const virtualizer = useLogVirtualizer(box, lines.length, (i) => lines[i]?.sequence_num ?? i);
  useLayoutEffect(() => {
    if (stick.current && lines.length) virtualizer.scrollToEnd();
  }, [lines, virtualizer]);
  // A resized window (a phone turned, a window dragged, a full-page screenshot) rewraps the lines and resizes the box;
  // the rows are measured again over the next frames, and the scroll position that leaves is no reader's. A reader
  // who followed the bottom goes on following it: the scroll events of the relayout must not read as scrolling away.
  useEffect(() => {
    const resized = () => {
      if (!stick.current) return;
      relayout.current = true;
      virtualizer.scrollToEnd();
    };
    window.addEventListener('resize', resized);
    return () => window.removeEventListener('resize', resized);
  }, [virtualizer]);
  const readerMoves = () => {
    relayout.current = false;
  };
  const origin = lines.length ? Date.parse(lines[0]!.timestamp) : undefined;

  return (
    <>
      <p className="live" role="status">
        <span className="live-dot" aria-hidden="true" /> {error ? error : connected ? 'Live: new lines appear as the job writes them.' : 'Live: waiting for output…'}
        {switched !== undefined ? (
          <span className="attempt-switch">
            {' '}
            Attempt {switched} started: its log starts at line 0; attempt {switched - 1}'s lines stay readable under Attempts.
          </span>
        ) : null}
      </p>
      <div
        className="log-box log-scroll"
        ref={box}
        tabIndex={0}
        style={LIVE_BOX}
        aria-label="Live log"
        onScroll={(e) => {
          const el = e.currentTarget;
          const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
          // Away from the bottom after a resize, before the reader touched the box: the relayout moved it, not the reader.
          if (!atBottom && stick.current && relayout.current) virtualizer.scrollToEnd();
          else stick.current = atBottom;
          onPosition(readerPosition(el, stick.current));
        }}
        onWheel={readerMoves}
        onTouchStart={readerMoves}
        onPointerDown={readerMoves}
        onKeyDown={readerMoves}
      >
        {lines.length === 0 ? (
          <p className="muted">No output yet.</p>
        ) : (
          <VirtualRows virtualizer={virtualizer} line={(i) => lines[i]} mode={mode} origin={origin} expanded={expanded} onToggle={toggle} />
        )}
      </div>
    </>
  );
}

/** Search results (or one stream), newest page first, older pages loaded above; each hit opens in context. */
function PagedLog({
  source,
  filters,
  queryKey,
  mode,
  onContext,
}: {
  source: LogSource;
  filters: LogFilters;
  queryKey: readonly unknown[];
  mode: TimeMode;
  onContext: (line: number) => void;
}) {
  const box = useRef<HTMLDivElement>(null);
  const opened = useRef(false);
  const pages = useInfiniteQuery({
    queryKey: [...queryKey, filters],
    queryFn: ({ pageParam }) => source.page(filters, pageParam),
    initialPageParam: '',
    getNextPageParam: (last) => last.cursor || undefined,
  });
  // A finished log opens at its end, where the newest lines are (and where a live tail left the reader).
  useLayoutEffect(() => {
    const el = box.current;
    if (!el || opened.current || !pages.data) return;
    opened.current = true;
    el.scrollTop = el.scrollHeight;
  }, [pages.data]);
  if (pages.isPending) return <Spinner label="Loading log…" />;
  if (pages.isError && !pages.data) return <p className="error-text">{pages.error.message}</p>;
  // Pages come newest first; the reader sees them oldest first, older pages above.
  const lines: Line[] = pages.data.pages.flatMap((p) => p.logs.map((l) => ({ ...l, token: p.highlight_token }))).reverse();
  return (
    <>
      {pages.hasNextPage ? (
        <button type="button" className="secondary" disabled={pages.isFetchingNextPage} onClick={() => void pages.fetchNextPage()}>
          {pages.isFetchingNextPage ? 'Loading…' : 'Load older lines'}
        </button>
      ) : null}
      <div className="log-box" ref={box} tabIndex={0} aria-label="Matching log lines">
        {lines.length === 0 ? <EmptyState title="No line matches" /> : <LogLines lines={lines} mode={mode} onContext={onContext} />}
      </div>
      <p className="muted">
        {lines.length} matching line{lines.length === 1 ? '' : 's'}
        {pages.hasNextPage ? ' shown; older ones above' : ''}
        {lines.length ? '. Select a line number to see the line in the whole log.' : ''}
      </p>
    </>
  );
}

/**
 * What the viewer shows: the search typed and the one applied, and where the
 * whole-log view opens (its end, where the live tail left the reader, or a
 * search hit opened in context).
 */
function useLogView() {
  const [q, setQ] = useState('');
  const [stream, setStream] = useState('');
  const [filters, setFilters] = useState<LogFilters>({});
  const searching = Boolean(filters.q || filters.stream);
  // Where the whole-log view opens: the end, where the live tail left the reader, or a search hit.
  const position = useRef<LogAnchor>({ end: true });
  const [opened, setOpened] = useState(0);
  const [hit, setHit] = useState<number>();
  // A search hit opened in context while the job runs shows the whole log so far, until the reader follows live again.
  const [context, setContext] = useState(false);
  // The search a hit was opened from. Its term stays in the box, and the bar above the
  // log says so and leads back to its results: the box never shows a term that silently
  // does nothing (dashboard/README.md, "Log viewer").
  const [from, setFrom] = useState<LogFilters>();

  const apply = (e: FormEvent) => {
    e.preventDefault();
    setFrom(undefined);
    setFilters({ ...(q ? { q } : {}), ...(stream ? { stream: stream as LogStream } : {}) });
  };
  const clear = () => {
    setQ('');
    setStream('');
    setFilters({});
    setFrom(undefined);
    position.current = { end: true };
    setHit(undefined);
  };
  const backToResults = () => {
    if (!from) return;
    setQ(from.q ?? '');
    setStream(from.stream ?? '');
    setFilters(from);
    setFrom(undefined);
  };
  const openInContext = (line: number) => {
    position.current = { line, align: 'center' };
    setHit(line);
    setOpened((n) => n + 1);
    setContext(true);
    setFrom(filters);
    setFilters({});
  };
  const followLive = () => {
    setFrom(undefined);
    setContext(false);
  };
  // Where the live tail leaves the reader: the whole-log view opens there.
  const leftAt = (at: LogAnchor) => {
    position.current = at;
  };
  return { q, setQ, stream, setStream, filters, searching, position, opened, hit, context, from, apply, clear, backToResults, openInContext, followLive, leftAt };
}

type LogView = ReturnType<typeof useLogView>;

function LogSearchForm({ view }: { view: LogView }) {
  const { q, setQ, stream, setStream, searching, apply, clear } = view;
  return (
    <form className="filters" role="search" aria-label="Search the log" onSubmit={apply}>
      <TextField id="log-q" label="Search" type="search" value={q} onChange={setQ} placeholder="Text in a line…" />
      <SelectField id="log-stream" label="Stream" value={stream} onChange={setStream} options={[['', 'Both streams'], 'stdout', 'stderr']} />
      <div className="row filters-buttons">
        <button type="submit">Search</button>
        {searching ? (
          <button type="button" className="secondary" onClick={clear}>
            Clear
          </button>
        ) : null}
      </div>
    </form>
  );
}

function LogDownloads({ source, filters }: { source: LogSource; filters: LogFilters }) {
  return (
    <div className="row downloads" aria-label="Download the log">
      {(['txt', 'json', 'jsonl'] as const).map((format) => (
        <a key={format} className="button secondary" href={source.rawUrl(format, filters)} download>
          Download .{format}
        </a>
      ))}
    </div>
  );
}

function TimeModeSelect({ mode, setMode }: { mode: TimeMode; setMode: (mode: TimeMode) => void }) {
  return (
    <div className="row log-options">
      <SelectField
        id="log-time"
        label="Times"
        value={mode}
        onChange={(v) => setMode(v as TimeMode)}
        options={[
          ['absolute', 'Clock time (your zone)'],
          ['relative', 'Since the first line'],
        ]}
      />
    </div>
  );
}

/** The whole log, opened at the view's position; above it, the search a hit came from and the way back to live. */
function WholeLog({ view, source, live, mode }: { view: LogView; source: LogSource; live: boolean; mode: TimeMode }) {
  const { from, hit, opened, position, backToResults, followLive } = view;
  return (
    <>
      {from && hit !== undefined ? (
        <div className="row search-context" role="status">
          <span>
            Line {hit} in context, from {from.q ? `the search for “${from.q}”${from.stream ? ` on ${from.stream}` : ''}` : `the ${from.stream ?? ''} lines`}.
          </span>
          <button type="button" className="secondary" onClick={backToResults}>
            Back to results
          </button>
        </div>
      ) : null}
      {live ? (
        <button type="button" className="secondary" onClick={followLive}>
          Follow live
        </button>
      ) : null}
      <LogScroll key={opened} source={source} anchorRef={position} mark={hit} mode={mode} />
    </>
  );
}

/**
 * A job's log: live while the job runs, in pages once it is done, and
 * searchable (matches highlighted) with a stream filter at any time. The
 * whole log (or what matches) downloads as text, JSON or JSON lines once the
 * job is finished.
 */
export function LogViewer({
  source,
  live,
  terminal,
  queryKey,
  onEnded,
  onFirstLine,
  attempt,
  onAttempt,
  searchable = true,
}: {
  source: LogSource;
  live: boolean;
  terminal: boolean;
  queryKey: readonly unknown[];
  onEnded: () => void;
  /** The job wrote its first line: it is running, whatever the last poll said. */
  onFirstLine?: () => void;
  /** The job's current attempt, when known: the live tail starts on it. */
  attempt?: number | undefined;
  /** The live tail moved on to a new attempt. */
  onAttempt?: (attempt: number) => void;
  /** False for an attempt given up: its lines are read whole, search covers the current attempt. */
  searchable?: boolean;
}) {
  const view = useLogView();
  const [mode, setMode] = useState<TimeMode>('absolute');
  const { filters, searching, context } = view;
  // On a phone the search, downloads and time format fold away behind a button, so the log itself starts on the first screen.
  const [showTools, setShowTools] = useState(false);

  return (
    <section className="logs" aria-labelledby="logs-title">
      <h2 id="logs-title">Logs</h2>
      <button type="button" className="secondary only-narrow" aria-expanded={showTools} aria-controls="log-tools" onClick={() => setShowTools((v) => !v)}>
        {showTools ? 'Hide search and downloads' : 'Search and downloads'}
      </button>
      <div id="log-tools" className={`log-tools${showTools || searching ? ' open' : ''}`}>
        {searchable ? <LogSearchForm view={view} /> : null}
        {terminal ? <LogDownloads source={source} filters={filters} /> : null}
        <TimeModeSelect mode={mode} setMode={setMode} />
      </div>
      {searching ? (
        <PagedLog source={source} filters={filters} queryKey={queryKey} mode={mode} onContext={view.openInContext} />
      ) : live && !context ? (
        <LiveLog source={source} attempt={attempt} onEnded={onEnded} onFirstLine={onFirstLine} onAttempt={onAttempt} mode={mode} onPosition={view.leftAt} />
      ) : (
        <WholeLog view={view} source={source} live={live} mode={mode} />
      )}
    </section>
  );
}
