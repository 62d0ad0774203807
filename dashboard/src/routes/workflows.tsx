import { infiniteQueryOptions, queryOptions, useInfiniteQuery, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api, ATTENTION_STATES, BUILD_STATUSES, call, isBuilding, WORKFLOW_KINDS, type AttentionState, type BuildStatus, type Workflow, type WorkflowKind } from '../api/client';
import { EmptyState, Spinner, StatusBadge } from '../components/badges';
import { BulkActions, SelectAll } from '../components/bulk-actions';
import { DataTable } from '../components/data-table';
import { SelectField, TextField } from '../components/fields';
import { HealthBadge, MissedMark, RelativeTime, RunStrip, Uptime } from '../components/health';
import { LoadMore } from '../components/load-more';
import { formatCount, formatInterval } from '../format';
import { useTitle } from '../components/use-title';

const FILTERS = ['query', 'kind', 'build_status', 'show', 'interval_min', 'interval_max', 'attention'] as const;
/** Which workflows: active ones and those terminated automatically (until acted on), all, or terminated ones. */
const SHOWS: readonly [string, string][] = [
  ['', 'Active'],
  ['all', 'All'],
  ['terminated', 'Terminated only'],
];
const SORTS: readonly [string, string][] = [
  ['', 'Needs attention first'],
  ['newest', 'Newest first'],
];
/** One request brings the health of up to this many workflows. */
const PAGE_SIZE = 100;
function withParam(old: URLSearchParams, name: string, value: string): URLSearchParams {
  const next = new URLSearchParams(old);
  if (value) next.set(name, value);
  else next.delete(name);
  return next;
}

const positive = (s: string | null) => (s && /^\d+$/.test(s) && Number(s) > 0 ? Number(s) : undefined);

/** The filters live in the URL; the name search follows typing, a moment after the last key. */
function useFilters() {
  const [params, setParams] = useSearchParams();
  const [search, setSearch] = useState(params.get('query') ?? '');
  const setFilter = (name: (typeof FILTERS)[number], value: string) =>
    setParams(
      (old) => {
        const next = new URLSearchParams(old);
        if (value) next.set(name, value);
        else next.delete(name);
        return next;
      },
      { replace: true },
    );

  useEffect(() => {
    if (search === (params.get('query') ?? '')) return;
    const t = setTimeout(() => setFilter('query', search), 300);
    return () => clearTimeout(t);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [search]);
  return { params, setParams, search, setSearch, setFilter };
}

type Filters = ReturnType<typeof useFilters>;

/**
 * The list request the filters in the URL make: ordered ("needs attention
 * first" unless newest is chosen), filtered and counted by the server over all
 * of the user's workflows, not just the pages fetched. Also started before the
 * session check answers (app.tsx), so the two do not wait for each other.
 */
export function workflowListQuery(params: URLSearchParams) {
  const show = params.get('show') ?? '';
  // `show=paused` (links made before paused was an attention state) asks for the same.
  const attention = params.get('attention') ?? (show === 'paused' ? 'paused' : null);
  const query = {
    query: params.get('query') || undefined,
    kind: (params.get('kind') || undefined) as WorkflowKind | undefined,
    build_status: (params.get('build_status') || undefined) as BuildStatus | undefined,
    ...(show === 'terminated' ? { terminated: true } : { include_terminated: true }),
    interval_min: positive(params.get('interval_min')),
    interval_max: positive(params.get('interval_max')),
    include: 'health' as const,
    sort: params.get('sort') === 'newest' ? ('newest' as const) : ('attention' as const),
    ...(attention && (ATTENTION_STATES as readonly string[]).includes(attention) ? { attention: attention as AttentionState } : {}),
    limit: PAGE_SIZE,
  };
  return infiniteQueryOptions({
    queryKey: ['workflows', 'list', query],
    queryFn: ({ pageParam }) => call(api.GET('/workflows', { params: { query: { ...query, ...(pageParam ? { cursor: pageParam } : {}) } } })),
    initialPageParam: '',
    getNextPageParam: (last) => last.cursor || undefined,
    // Health moves with every run and with time: follow it, quickly while something builds.
    refetchInterval: (q) => (q.state.data?.pages.some((p) => p.workflows.some((w) => isBuilding(w.build_status))) ? 2_000 : 30_000),
  });
}

/** How many workflows are in each attention state, all of them (the filter buttons' counts). */
export const attentionSummaryQuery = queryOptions({
  queryKey: ['workflows', 'summary'],
  queryFn: () => call(api.GET('/workflow-summary')),
  refetchInterval: 30_000,
});

/** The workflows the filters select, with their health, in the server's order. */
function useWorkflowList(params: URLSearchParams) {
  const show = params.get('show') ?? '';
  const list = useInfiniteQuery(workflowListQuery(params));
  const loaded = list.data?.pages.flatMap((p) => p.workflows) ?? [];
  // The default view leaves out what its owner terminated; what the failure limit terminated stays until acted on.
  const workflows =
    show === '' ? loaded.filter((w) => !w.terminated_at || w.health?.auto_terminated) : loaded;
  const autoTerminated = workflows.filter((w) => w.health?.auto_terminated);
  return { list, workflows, autoTerminated };
}

const ATTENTION_TEXT: Record<AttentionState, string> = {
  down: 'Down',
  degraded: 'Degraded',
  building: 'Building',
  healthy: 'Healthy',
  paused: 'Paused',
  terminated: 'Terminated',
};

/** One button a state with its count over all workflows; pressing one shows only that state. */
function AttentionFilter({ filters }: { filters: Filters }) {
  const summary = useQuery(attentionSummaryQuery);
  const current = filters.params.get('attention') ?? '';
  const counts = summary.data?.attention;
  return (
    <div className="attention-filter" role="group" aria-label="Workflows by state">
      {ATTENTION_STATES.map((s) => (
        <button
          key={s}
          type="button"
          className={`chip chip-${s}${current === s ? ' chip-on' : ''}`}
          aria-pressed={current === s}
          onClick={() => filters.setParams((old) => withParam(old, 'attention', current === s ? '' : s), { replace: true })}
        >
          {ATTENTION_TEXT[s]} <span className="chip-count">{counts ? formatCount(counts[s]) : '…'}</span>
        </button>
      ))}
    </div>
  );
}

/** The name search, and behind a button on a phone, the other filters and the order. */
function FilterForm({ filters }: { filters: Filters }) {
  const { params, setParams, search, setSearch, setFilter } = filters;
  const show = params.get('show') ?? '';
  const sort = params.get('sort') ?? '';
  // On a phone the filters beyond the name search fold away behind a button.
  const [showFilters, setShowFilters] = useState(false);
  return (
    <form className="filters" role="search" aria-label="Filter workflows" onSubmit={(e) => e.preventDefault()}>
      <TextField id="f-query" label="Search by name" type="search" value={search} onChange={setSearch} placeholder="Name contains…" />
      <button
        type="button"
        className="secondary only-narrow"
        aria-expanded={showFilters}
        aria-controls="more-filters"
        onClick={() => setShowFilters((v) => !v)}
      >
        {showFilters ? 'Fewer filters' : 'More filters'}
      </button>
      <div id="more-filters" className={`filters-more${showFilters ? ' open' : ''}`}>
        <SelectField id="f-kind" label="Kind" value={params.get('kind') ?? ''} onChange={(v) => setFilter('kind', v)} options={[['', 'Any kind'], ...WORKFLOW_KINDS]} />
        <SelectField
          id="f-build"
          label="Build status"
          value={params.get('build_status') ?? ''}
          onChange={(v) => setFilter('build_status', v)}
          options={[['', 'Any build status'], ...BUILD_STATUSES]}
        />
        <TextField id="f-min" label="Interval from (min)" type="number" min={0} inputMode="numeric" value={params.get('interval_min') ?? ''} onChange={(v) => setFilter('interval_min', v)} />
        <TextField id="f-max" label="Interval to (min)" type="number" min={0} inputMode="numeric" value={params.get('interval_max') ?? ''} onChange={(v) => setFilter('interval_max', v)} />
        <SelectField id="f-show" label="Show" value={show} onChange={(v) => setFilter('show', v)} options={SHOWS} />
        <SelectField id="f-sort" label="Order" value={sort} onChange={(v) => setParams((old) => withParam(old, 'sort', v), { replace: true })} options={SORTS} />
      </div>
    </form>
  );
}

/** The workflows the failure limit stopped, until their owner acts on them. */
function AutoTerminatedCallout({ autoTerminated }: { autoTerminated: Workflow[] }) {
  if (autoTerminated.length === 0) return null;
  return (
    <section className="callout callout-bad" aria-labelledby="auto-terminated-title">
      <h2 id="auto-terminated-title">Terminated automatically</h2>
      <p>
        {autoTerminated.length === 1
          ? 'This workflow failed too many times in a row and stopped running. Open it to update it (which starts it again) or delete it.'
          : 'These workflows failed too many times in a row and stopped running. Open one to update it (which starts it again) or delete it.'}
      </p>
      <ul>
        {autoTerminated.map((w) => (
          <li key={w.id}>
            <Link to={`/workflows/${w.id}`}>{w.name}</Link> — {w.consecutive_job_failures_count} failures in a row
            {w.health?.last_run ? (
              <>
                , last failed <RelativeTime iso={w.health.last_run.completed_at ?? w.health.last_run.scheduled_at} />
              </>
            ) : null}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** One row per workflow: a checkbox to select it, its state, name, recent runs and timings. */
function WorkflowTable({ workflows, selected, onToggle }: { workflows: Workflow[]; selected: ReadonlySet<string>; onToggle: (id: string) => void }) {
  return (
    <DataTable
      label="Workflows"
      rows={workflows}
      rowKey={(w) => w.id}
      rowClass={(w) => (w.health ? `row-${w.health.state}` : '')}
      columns={[
        {
          header: 'Select',
          cell: (w) => <input type="checkbox" aria-label={`Select ${w.name}`} checked={selected.has(w.id)} onChange={() => onToggle(w.id)} />,
        },
        {
          header: 'State',
          cell: (w) => (
            <span className="state-cell">
              {w.health ? <HealthBadge health={w.health} /> : <StatusBadge status={w.build_status} />}
              {w.health?.auto_terminated ? <StatusBadge status="FAILED" label="terminated automatically" /> : null}
              {w.health ? <MissedMark health={w.health} /> : null}
            </span>
          ),
        },
        {
          header: 'Name',
          cell: (w) => (
            <span className="name-cell">
              <Link to={`/workflows/${w.id}`}>{w.name}</Link>
              <span className="muted small">
                {w.kind === 'HEARTBEAT' ? 'HTTP check' : 'Container'} · every {formatInterval(w.interval)}
              </span>
            </span>
          ),
        },
        { header: 'Recent runs', cell: (w) => (w.health ? <RunStrip runs={w.health.recent_runs} /> : null) },
        {
          header: 'Last run',
          cell: (w) => <RelativeTime iso={w.health?.running ? undefined : (w.health?.last_run?.completed_at ?? w.health?.last_run?.scheduled_at)} fallback={w.health?.running ? 'running now' : '—'} />,
        },
        { header: 'Next run', cell: (w) => <RelativeTime iso={w.health?.next_run_at} /> },
        { header: 'Uptime 24 h', cell: (w) => (w.health ? <Uptime uptime={w.health.uptime} /> : null) },
      ]}
    />
  );
}

export function WorkflowsPage() {
  useTitle('Workflows');
  const filters = useFilters();
  const { params } = filters;
  const { list, workflows, autoTerminated } = useWorkflowList(params);
  const filtered = FILTERS.some((f) => params.get(f));
  const client = useQueryClient();
  const [selectedIds, setSelectedIds] = useState<Set<string>>(() => new Set());
  // Only what is on screen can be acted on: a workflow a filter hides is not in the selection.
  const selected = workflows.filter((w) => selectedIds.has(w.id));
  const toggle = (id: string) =>
    setSelectedIds((old) => {
      const next = new Set(old);
      if (!next.delete(id)) next.add(id);
      return next;
    });

  return (
    <div>
      <div className="page-head">
        <h1>Workflows</h1>
        <Link to="/workflows/new" className="button">
          New workflow
        </Link>
      </div>
      <FilterForm filters={filters} />
      <AttentionFilter filters={filters} />

      <AutoTerminatedCallout autoTerminated={autoTerminated} />

      {list.isPending ? (
        <Spinner />
      ) : list.isError && !list.data ? (
        <p className="error-text">{list.error.message}</p>
      ) : workflows.length === 0 ? (
        filtered ? (
          <EmptyState title="No workflow matches these filters" />
        ) : (
          <EmptyState title="No workflows yet">
            <p>A workflow runs an HTTP check or a container every few minutes.</p>
            <Link to="/workflows/new" className="button">
              Create your first workflow
            </Link>
          </EmptyState>
        )
      ) : (
        <div className="workflow-list">
          <BulkActions selected={selected} onClear={() => setSelectedIds(new Set())} onFinished={() => void client.invalidateQueries({ queryKey: ['workflows'] })} />
          <SelectAll workflows={workflows} selected={selectedIds} onChange={setSelectedIds} />
          <WorkflowTable workflows={workflows} selected={selectedIds} onToggle={toggle} />
        </div>
      )}
      <LoadMore hasMore={list.hasNextPage} loading={list.isFetchingNextPage} onLoad={() => void list.fetchNextPage()} />
    </div>
  );
}
