import type { ReactNode } from 'react';

export type Fact = readonly [term: string, value: ReactNode, wide?: boolean];

/** Label–value pairs (a workflow's details, a job's timings, totals): a definition list. */
export function Facts({ items, className = 'details', label }: { items: readonly (Fact | false | null | undefined)[]; className?: string; label?: string }) {
  return (
    <dl className={className} aria-label={label}>
      {items
        .filter((f): f is Fact => Boolean(f))
        .map(([term, value, wide]) => (
          <div key={term} className={wide ? 'wide' : undefined}>
            <dt>{term}</dt>
            <dd>{value}</dd>
          </div>
        ))}
    </dl>
  );
}
