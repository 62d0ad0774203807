/**
 * The lines of a job's log on screen: one line (its time, its highlights, its
 * JSON opened on demand), a plain list of them, and the virtualized rows of a
 * long log with the blocks of lines it keeps loaded. The views that arrange
 * them (scroll, live tail, search pages) are log-viewer.tsx's.
 */
import { useVirtualizer } from '@tanstack/react-virtual';
import { useCallback, useLayoutEffect, useRef, useState, type Ref } from 'react';
import type { LogEntry } from '../api/client';
import { Highlighted, withoutHighlights } from './highlighted';
import type { LogSource } from './log-source';

/** Lines per request of the scrolling view, and how many such blocks it keeps in memory. */
export const BLOCK = 500;
const MAX_BLOCKS = 24;
/** A line's height before it is measured (one line of text). */
const ROW_ESTIMATE_PX = 20;

export type Line = LogEntry & { token?: string };

/** Where the scrolling view opens: at the end of the log, or at a line (marked when it is a search hit or a jump). */
export type LogAnchor = { end: true } | { line: number; align: 'start' | 'center' };

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

interface LogLineProps {
  l: Line;
  mode: TimeMode;
  origin: number | undefined;
  /** Controlled expansion (the scrolling view keeps it while the row is recycled). */
  open?: boolean;
  onToggle?: () => void;
  /** A search hit: the line number opens the hit among its neighbours. */
  onContext?: () => void;
  marked?: boolean;
  rowRef?: Ref<HTMLLIElement>;
  index?: number;
}

function LogLine({ l, mode, origin, open: controlled, onToggle, onContext, marked, rowRef, index }: LogLineProps) {
  const [own, setOwn] = useState(false);
  const open = controlled ?? own;
  // A search result's JSON is read without the markers; expanded, it shows as stored.
  const json = jsonOf(withoutHighlights(l.message, l.token));
  return (
    <li className={`log-line log-${l.stream}${marked ? ' log-marked' : ''}`} ref={rowRef} data-index={index} aria-current={marked ? 'true' : undefined}>
      {onContext ? (
        <button type="button" className="log-seq log-context" title="Show this line in context" aria-label={`Show line ${l.sequence_num} in context`} onClick={onContext}>
          {l.sequence_num}
        </button>
      ) : (
        <span className="log-seq">{l.sequence_num}</span>
      )}
      <time className="log-time" dateTime={l.timestamp} title={new Date(l.timestamp).toString()}>
        {formatLineTime(l.timestamp, mode, origin)}
      </time>
      <span className="log-stream">{l.stream}</span>
      <span className="log-message">
        {json !== undefined ? (
          <button type="button" className="log-json-toggle" aria-expanded={open} aria-label={open ? 'Collapse JSON' : 'Expand JSON'} onClick={onToggle ?? (() => setOwn((o) => !o))}>
            {open ? '▾' : '▸'}
          </button>
        ) : null}
        {open && json !== undefined ? <pre className="log-json">{JSON.stringify(json, null, 2)}</pre> : <Highlighted text={l.message} token={l.token} />}
      </span>
    </li>
  );
}

export function LogLines({ lines, mode = 'absolute', onContext }: { lines: Line[]; mode?: TimeMode; onContext?: ((line: number) => void) | undefined }) {
  const origin = lines.length ? Date.parse(lines[0]!.timestamp) : undefined;
  return (
    <ol className="log-lines">
      {lines.map((l) => (
        <LogLine key={l.sequence_num} l={l} mode={mode} origin={origin} {...(onContext ? { onContext: () => onContext(l.sequence_num) } : {})} />
      ))}
    </ol>
  );
}

/**
 * The lines of a log by position, fetched in blocks of BLOCK as they come into
 * view; at most MAX_BLOCKS blocks are kept (the least recently used go), so
 * memory stays bounded whatever the log's length.
 */
export function useLineBlocks(source: LogSource) {
  const blocks = useRef(new Map<number, Line[]>());
  const pending = useRef(new Set<number>());
  const [total, setTotal] = useState<number>();
  const [origin, setOrigin] = useState<number>();
  const [error, setError] = useState<string>();
  const [, setVersion] = useState(0);
  const load = useCallback(
    (block: number) => {
      const have = blocks.current.get(block);
      if (have) {
        // Most recently used last: the Map's order is the eviction order.
        blocks.current.delete(block);
        blocks.current.set(block, have);
        return;
      }
      if (pending.current.has(block)) return;
      pending.current.add(block);
      source.lines(block * BLOCK, BLOCK).then(
        (range) => {
          pending.current.delete(block);
          blocks.current.set(block, range.logs);
          for (const old of blocks.current.keys()) {
            if (blocks.current.size <= MAX_BLOCKS) break;
            blocks.current.delete(old);
          }
          if (block === 0 && range.logs[0]) setOrigin(Date.parse(range.logs[0].timestamp));
          setTotal((t) => Math.max(t ?? 0, range.total));
          setError(undefined);
          setVersion((v) => v + 1);
        },
        (err: unknown) => {
          pending.current.delete(block);
          setError(err instanceof Error ? err.message : 'The log could not be read.');
        },
      );
    },
    [source],
  );
  const line = (i: number): Line | undefined => blocks.current.get(Math.floor(i / BLOCK))?.[i % BLOCK];
  return { total, origin, error, load, line };
}

/** A virtualizer over `count` rows of a log box: rows measured (wrapped and expanded lines take their real height). */
export function useLogVirtualizer(box: { readonly current: HTMLDivElement | null }, count: number, key?: (index: number) => number) {
  // The compiler cannot memoize around the virtualizer (its functions change as it scrolls); these components are not memoized.
  // eslint-disable-next-line react-hooks/incompatible-library
  return useVirtualizer({
    count,
    getScrollElement: () => box.current,
    estimateSize: () => ROW_ESTIMATE_PX,
    overscan: 20,
    // Before the box is measured (and in jsdom, where nothing has a size) assume a screenful.
    initialRect: { width: 800, height: 600 },
    // Its default flushes a re-render synchronously when a row's measured size changes, which
    // React refuses while it is rendering (the row's ref measures during commit); a normal
    // update is enough, and React batches it.
    useFlushSync: false,
    ...(key ? { getItemKey: key } : {}),
  });
}

/** The rows in view of a virtualized log, in a spacer as tall as the whole log; a row whose line is not loaded yet shows its number. */
export function VirtualRows({
  virtualizer,
  line,
  mode,
  origin,
  expanded,
  onToggle,
  marked,
}: {
  virtualizer: ReturnType<typeof useLogVirtualizer>;
  line: (index: number) => Line | undefined;
  mode: TimeMode;
  origin: number | undefined;
  expanded: ReadonlySet<number>;
  onToggle: (sequenceNum: number) => void;
  marked?: number | undefined;
}) {
  const items = virtualizer.getVirtualItems();
  return (
    <div className="log-space" style={{ height: virtualizer.getTotalSize() }}>
      <ol className="log-lines" style={{ transform: `translateY(${items[0]?.start ?? 0}px)` }}>
        {items.map((v) => {
          const l = line(v.index);
          return l ? (
            <LogLine
              key={v.key}
              l={l}
              mode={mode}
              origin={origin}
              open={expanded.has(l.sequence_num)}
              onToggle={() => onToggle(l.sequence_num)}
              marked={marked === l.sequence_num}
              rowRef={virtualizer.measureElement}
              index={v.index}
            />
          ) : (
            <li key={v.key} className="log-line log-pending" ref={virtualizer.measureElement} data-index={v.index}>
              <span className="log-seq">{v.index}</span>
              <span className="log-time" />
              <span className="log-stream" />
              <span className="log-message">…</span>
            </li>
          );
        })}
      </ol>
    </div>
  );
}

/** A log box as tall as its rows, up to 60% of the window (then it scrolls). */
export function boxHeight(virtualizer: ReturnType<typeof useLogVirtualizer>, count: number) {
  return count ? { height: `min(60vh, ${virtualizer.getTotalSize() + 2}px)` } : undefined;
}

/** The least a fitted log box keeps, however far down the page it starts: about ten lines. */
const FIT_MIN_PX = 192;
/** Room kept under the box: the line count below it and a little air. */
const FIT_BELOW_PX = 40;

/**
 * Caps the log box at what is left of the first screen below its top, so that
 * a finished log, opened at its end, shows its last line without the page
 * being scrolled (issue 26) — on a phone too, where the job's facts and the
 * log's controls take most of the screen. Written on the element (max-height)
 * and called before useLogVirtualizer, so that the virtualizer measures the
 * box, and the log is placed at its end, at the capped height.
 */
export function useFitToFirstScreen(box: { readonly current: HTMLElement | null }, ready: boolean): void {
  useLayoutEffect(() => {
    const el = box.current;
    if (!ready || !el) return;
    const fit = () => {
      const top = el.getBoundingClientRect().top + window.scrollY;
      el.style.setProperty('max-height', `${Math.max(FIT_MIN_PX, Math.floor(window.innerHeight - top - FIT_BELOW_PX))}px`);
    };
    fit();
    window.addEventListener('resize', fit);
    return () => window.removeEventListener('resize', fit);
  }, [box, ready]);
}

/** Expanded JSON lines by sequence_num, kept while their rows scroll out of view and back. */
export function useExpanded(): [ReadonlySet<number>, (n: number) => void] {
  const [expanded, setExpanded] = useState<ReadonlySet<number>>(new Set());
  const toggle = useCallback(
    (n: number) =>
      setExpanded((old) => {
        const next = new Set(old);
        if (!next.delete(n)) next.add(n);
        return next;
      }),
    [],
  );
  return [expanded, toggle];
}
