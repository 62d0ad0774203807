import { useInfiniteQuery } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api, BUILD_STATUSES, call, isBuilding, WORKFLOW_KINDS, type BuildStatus, type WorkflowKind } from '../api/client';
import { EmptyState, Spinner, StatusBadge } from '../components/badges';
import { DataTable } from '../components/data-table';
import { CheckboxField, SelectField, TextField } from '../components/fields';
import { LoadMore } from '../components/load-more';
import { formatInterval, formatTime } from '../format';
import { useTitle } from '../components/use-title';

const FILTERS = ['query', 'kind', 'build_status', 'terminated', 'interval_min', 'interval_max'] as const;
const positive = (s: string | null) => (s && /^\d+$/.test(s) && Number(s) > 0 ? Number(s) : undefined);

export function WorkflowsPage() {
  useTitle('Workflows');
  const [params, setParams] = useSearchParams();
  const [search, setSearch] = useState(params.get('query') ?? '');
  // On a phone the filters beyond the name search fold away behind a button.
  const [showFilters, setShowFilters] = useState(false);
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

  // The name search follows typing, a moment after the last key.
  useEffect(() => {
    if (search === (params.get('query') ?? '')) return;
    const t = setTimeout(() => setFilter('query', search), 300);
    return () => clearTimeout(t);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [search]);

  const query = {
    query: params.get('query') || undefined,
    kind: (params.get('kind') || undefined) as WorkflowKind | undefined,
    build_status: (params.get('build_status') || undefined) as BuildStatus | undefined,
    terminated: params.get('terminated') === 'true',
    interval_min: positive(params.get('interval_min')),
    interval_max: positive(params.get('interval_max')),
  };
  const list = useInfiniteQuery({
    queryKey: ['workflows', 'list', query],
    queryFn: ({ pageParam }) => call(api.GET('/workflows', { params: { query: { ...query, ...(pageParam ? { cursor: pageParam } : {}) } } })),
    initialPageParam: '',
    getNextPageParam: (last) => last.cursor || undefined,
    refetchInterval: (q) => (q.state.data?.pages.some((p) => p.workflows.some((w) => isBuilding(w.build_status))) ? 2_000 : false),
  });
  const workflows = list.data?.pages.flatMap((p) => p.workflows) ?? [];
  const filtered = FILTERS.some((f) => params.get(f));

  return (
    <div>
      <div className="page-head">
        <h1>Workflows</h1>
        <Link to="/workflows/new" className="button">
          New workflow
        </Link>
      </div>
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
          <CheckboxField id="f-terminated" label="Terminated only" checked={query.terminated} onChange={(v) => setFilter('terminated', v ? 'true' : '')} />
        </div>
      </form>

      {list.isPending ? (
        <Spinner />
      ) : list.isError ? (
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
        <DataTable
          label="Workflows"
          rows={workflows}
          rowKey={(w) => w.id}
          columns={[
            {
              header: 'Name',
              cell: (w) => (
                <>
                  <Link to={`/workflows/${w.id}`}>{w.name}</Link>
                  {w.terminated_at ? <StatusBadge status="TERMINATED" label="terminated" /> : null}
                </>
              ),
            },
            { header: 'Kind', cell: (w) => w.kind },
            { header: 'Build', cell: (w) => <StatusBadge status={w.build_status} /> },
            { header: 'Every', cell: (w) => formatInterval(w.interval) },
            { header: 'Failures', cell: (w) => `${w.consecutive_job_failures_count} / ${w.max_consecutive_job_failures_allowed}` },
            { header: 'Created', cell: (w) => formatTime(w.created_at) },
          ]}
        />
      )}
      <LoadMore hasMore={list.hasNextPage} loading={list.isFetchingNextPage} onLoad={() => void list.fetchNextPage()} />
    </div>
  );
}
