import { useInfiniteQuery } from '@tanstack/react-query';
import { useEffect, useLayoutEffect, useRef, useState, type FormEvent } from 'react';
import type { LogEntry } from '../api/client';
import { EmptyState, Spinner } from './badges';
import { SelectField, TextField } from './fields';
import { Highlighted } from './highlighted';
import type { LogFilters, LogSource, LogStream } from './log-source';

/** Lines kept in memory while tailing; older ones stay readable through the pages once the job ends. */
const LIVE_LIMIT = 5_000;

type Line = LogEntry & { token?: string };

export type TimeMode = 'absolute' | 'relative';

/** "14:03:07.250" in the reader's zone, or "+1.250s" after the first line shown. */
function formatLineTime(iso: string, mode: TimeMode, origin: number | undefined): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  if (mode === 'relative' && origin !== undefined) return `+${((t - origin) / 1000).toFixed(3)}s`;
  const d = new Date(t);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** The message as a JSON object or array, when it is one. */
function jsonOf(message: string): unknown {
  const m = message.trim();
  if (!(m.startsWith('{') && m.endsWith('}')) && !(m.startsWith('[') && m.endsWith(']'))) return undefined;
  try {
    return JSON.parse(m) as unknown;
  } catch {
    return undefined;
  }
}

function LogLine({ l, mode, origin }: { l: Line; mode: TimeMode; origin: number | undefined }) {
  const [open, setOpen] = useState(false);
  const json = jsonOf(l.message);
  return (
    <li className={`log-line log-${l.stream}`}>
      <span className="log-seq">{l.sequence_num}</span>
      <time className="log-time" dateTime={l.timestamp} title={new Date(l.timestamp).toString()}>
        {formatLineTime(l.timestamp, mode, origin)}
      </time>
      <span className="log-stream">{l.stream}</span>
      <span className="log-message">
        {json !== undefined ? (
          <button type="button" className="log-json-toggle" aria-expanded={open} aria-label={open ? 'Collapse JSON' : 'Expand JSON'} onClick={() => setOpen((o) => !o)}>
            {open ? '▾' : '▸'}
          </button>
        ) : null}
        {open && json !== undefined ? <pre className="log-json">{JSON.stringify(json, null, 2)}</pre> : <Highlighted text={l.message} token={l.token} />}
      </span>
    </li>
  );
}

function LogLines({ lines, mode = 'absolute' }: { lines: Line[]; mode?: TimeMode }) {
  const origin = lines.length ? Date.parse(lines[0]!.timestamp) : undefined;
  return (
    <ol className="log-lines">
      {lines.map((l) => (
        <LogLine key={l.sequence_num} l={l} mode={mode} origin={origin} />
      ))}
    </ol>
  );
}

/** Follows a running job's log, keeping to the bottom while the reader is there. */
function LiveLog({ source, onEnded, onFirstLine, mode }: { source: LogSource; onEnded: () => void; onFirstLine?: (() => void) | undefined; mode: TimeMode }) {
  const [lines, setLines] = useState<Line[]>([]);
  const [error, setError] = useState<string>();
  const [connected, setConnected] = useState(false);
  const box = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const ended = useRef(onEnded);
  const first = useRef(onFirstLine);
  useEffect(() => {
    ended.current = onEnded;
    first.current = onFirstLine;
  });

  useEffect(() => {
    let last = -1;
    return source.tail(undefined, {
      onLog(entry) {
        setConnected(true);
        if (entry.sequence_num <= last) return;
        if (last === -1) first.current?.();
        last = entry.sequence_num;
        setLines((old) => (old.length >= LIVE_LIMIT ? [...old.slice(old.length - LIVE_LIMIT + 1), entry] : [...old, entry]));
      },
      onEnd: () => ended.current(),
      onError: setError,
    });
  }, [source]);

  useLayoutEffect(() => {
    const el = box.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [lines]);

  return (
    <>
      <p className="live" role="status">
        <span className="live-dot" aria-hidden="true" /> {error ? error : connected ? 'Live: new lines appear as the job writes them.' : 'Live: waiting for output…'}
      </p>
      <div
        className="log-box"
        ref={box}
        tabIndex={0}
        aria-label="Live log"
        onScroll={(e) => {
          const el = e.currentTarget;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
        }}
      >
        {lines.length === 0 ? <p className="muted">No output yet.</p> : <LogLines lines={lines} mode={mode} />}
      </div>
    </>
  );
}

function PagedLog({ source, filters, queryKey, mode }: { source: LogSource; filters: LogFilters; queryKey: readonly unknown[]; mode: TimeMode }) {
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
  const searching = Boolean(filters.q || filters.stream);
  return (
    <>
      {pages.hasNextPage ? (
        <button type="button" className="secondary" disabled={pages.isFetchingNextPage} onClick={() => void pages.fetchNextPage()}>
          {pages.isFetchingNextPage ? 'Loading…' : 'Load older lines'}
        </button>
      ) : null}
      <div className="log-box" ref={box} tabIndex={0} aria-label={searching ? 'Matching log lines' : 'Log'}>
        {lines.length === 0 ? <EmptyState title={searching ? 'No line matches' : 'No output'} /> : <LogLines lines={lines} mode={mode} />}
      </div>
      <p className="muted">
        {lines.length} line{lines.length === 1 ? '' : 's'}
        {pages.hasNextPage ? ' shown; older ones above' : ''}
      </p>
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
}: {
  source: LogSource;
  live: boolean;
  terminal: boolean;
  queryKey: readonly unknown[];
  onEnded: () => void;
  /** The job wrote its first line: it is running, whatever the last poll said. */
  onFirstLine?: () => void;
}) {
  const [q, setQ] = useState('');
  const [stream, setStream] = useState('');
  const [filters, setFilters] = useState<LogFilters>({});
  const [mode, setMode] = useState<TimeMode>('absolute');
  const searching = Boolean(filters.q || filters.stream);

  const apply = (e: FormEvent) => {
    e.preventDefault();
    setFilters({ ...(q ? { q } : {}), ...(stream ? { stream: stream as LogStream } : {}) });
  };

  return (
    <section className="logs" aria-labelledby="logs-title">
      <h2 id="logs-title">Logs</h2>
      <form className="filters" role="search" aria-label="Search the log" onSubmit={apply}>
        <TextField id="log-q" label="Search" type="search" value={q} onChange={setQ} placeholder="Text in a line…" />
        <SelectField id="log-stream" label="Stream" value={stream} onChange={setStream} options={[['', 'Both streams'], 'stdout', 'stderr']} />
        <div className="row filters-buttons">
          <button type="submit">Search</button>
          {searching ? (
            <button
              type="button"
              className="secondary"
              onClick={() => {
                setQ('');
                setStream('');
                setFilters({});
              }}
            >
              Clear
            </button>
          ) : null}
        </div>
      </form>
      {terminal ? (
        <div className="row downloads" aria-label="Download the log">
          {(['txt', 'json', 'jsonl'] as const).map((format) => (
            <a key={format} className="button secondary" href={source.rawUrl(format, filters)} download>
              Download .{format}
            </a>
          ))}
        </div>
      ) : null}
      <div className="row log-options">
        <SelectField
          id="log-time"
          label="Times"
          value={mode}
          onChange={(v) => setMode(v as TimeMode)}
          options={[
            ['absolute', 'Clock time (your zone)'],
            ['relative', 'Since the first line shown'],
          ]}
        />
      </div>
      {live && !searching ? (
        <LiveLog source={source} onEnded={onEnded} onFirstLine={onFirstLine} mode={mode} />
      ) : (
        <PagedLog source={source} filters={filters} queryKey={queryKey} mode={mode} />
      )}
    </section>
  );
}
