import { useRef, useState } from 'react';
import type { Workflow } from '../api/client';
import { BULK_LABELS, runBulk, type BulkAction, type BulkOptions, type BulkResult } from '../api/bulk';
import { randomKey } from '../api/idempotency';
import { ConfirmButton } from './confirm';

interface Report {
  action: BulkAction;
  results: BulkResult[];
}

const OUTCOME_LABEL: Record<BulkResult['outcome'], string> = { waiting: 'waiting', done: 'done', already: 'already so', refused: 'refused' };

/**
 * The keys of the last action: kept while the same action is repeated (so a
 * second click replays instead of acting twice), forgotten when another
 * action runs or the results are dismissed.
 */
function useBulkKeys() {
  const keys = useRef<{ action?: BulkAction; byWorkflow: Map<string, string> }>({ byWorkflow: new Map() });
  const keyFor = (action: BulkAction, id: string) => {
    if (keys.current.action !== action) keys.current = { action, byWorkflow: new Map() };
    let key = keys.current.byWorkflow.get(id);
    if (!key) keys.current.byWorkflow.set(id, (key = randomKey()));
    return key;
  };
  const forget = () => {
    keys.current = { byWorkflow: new Map() };
  };
  return { keyFor, forget };
}

/** Select all on this page: checked when every shown workflow is selected, mixed when some are. */
export function SelectAll({ workflows, selected, onChange }: { workflows: readonly Workflow[]; selected: ReadonlySet<string>; onChange: (ids: Set<string>) => void }) {
  const count = workflows.filter((w) => selected.has(w.id)).length;
  const all = count > 0 && count === workflows.length;
  return (
    <label className="select-all">
      <input
        type="checkbox"
        checked={all}
        ref={(el) => {
          if (el) el.indeterminate = count > 0 && !all;
        }}
        onChange={() => onChange(all ? new Set() : new Set(workflows.map((w) => w.id)))}
      />
      Select all on this page
    </label>
  );
}

/**
 * Pause, Resume, Run now and Terminate (behind a confirm) for the selected
 * workflows, with each workflow's result. `onFinished` runs after every
 * request has its answer (to refresh the list).
 */
export function BulkActions({
  selected,
  onClear,
  onFinished,
  sleep,
}: {
  selected: readonly Workflow[];
  onClear: () => void;
  onFinished: () => void;
  sleep?: BulkOptions['sleep'];
}) {
  const { keyFor, forget } = useBulkKeys();
  const [running, setRunning] = useState<BulkAction | undefined>();
  const [report, setReport] = useState<Report | undefined>();

  const start = async (action: BulkAction) => {
    const targets = [...selected];
    setRunning(action);
    setReport({ action, results: targets.map((w) => ({ id: w.id, name: w.name, outcome: 'waiting', message: '' })) });
    const onResult = (r: BulkResult) => setReport((old) => old && { ...old, results: old.results.map((x) => (x.id === r.id ? r : x)) });
    try {
      await runBulk(action, targets, { keyFor, onResult, sleep });
    } finally {
      setRunning(undefined);
      onFinished();
    }
  };
  const none = selected.length === 0;
  const busy = running !== undefined;

  return (
    <section className="bulk" aria-label="Bulk actions">
      <div className="row bulk-bar">
        <span className="muted">{none ? 'Select workflows to act on several at once.' : `${selected.length} selected`}</span>
        {(['pause', 'resume', 'run'] as const).map((a) => (
          <button key={a} type="button" className="secondary" disabled={none || busy} onClick={() => void start(a)}>
            {BULK_LABELS[a].verb}
          </button>
        ))}
        <ConfirmButton
          label="Terminate"
          danger
          question={`Terminate ${selected.length} ${selected.length === 1 ? 'workflow' : 'workflows'}? Their pending jobs are canceled and running ones are stopped.`}
          confirmLabel="Yes, terminate"
          disabled={none || busy}
          onConfirm={() => void start('terminate')}
        />
        <button
          type="button"
          className="secondary"
          disabled={none || busy}
          onClick={() => {
            forget();
            onClear();
          }}
        >
          Clear selection
        </button>
      </div>
      <BulkReport
        report={report}
        busy={busy}
        onDismiss={() => {
          forget();
          setReport(undefined);
        }}
      />
    </section>
  );
}

/** A live summary (how many answered, then how many done, already so, refused) and each workflow's result. */
function BulkReport({ report, busy, onDismiss }: { report: Report | undefined; busy: boolean; onDismiss: () => void }) {
  const waiting = report?.results.filter((r) => r.outcome === 'waiting').length ?? 0;
  const count = (o: BulkResult['outcome']) => report?.results.filter((r) => r.outcome === o).length ?? 0;
  return (
    <>
      <p role="status" className="small">
        {report
          ? waiting > 0
            ? `${BULK_LABELS[report.action].verb}: ${report.results.length - waiting} of ${report.results.length} answered…`
            : `${BULK_LABELS[report.action].verb}: ${count('done')} done, ${count('already')} already so, ${count('refused')} refused.`
          : ''}
      </p>
      {report ? (
        <div className="bulk-report">
          <table className="table" aria-label="Bulk action results">
            <thead>
              <tr>
                <th scope="col">Workflow</th>
                <th scope="col">Result</th>
              </tr>
            </thead>
            <tbody>
              {report.results.map((r) => (
                <tr key={r.id} className={`bulk-${r.outcome}`}>
                  <td>{r.name}</td>
                  <td>
                    <strong>{OUTCOME_LABEL[r.outcome]}</strong>
                    {r.message ? ` — ${r.message}` : ''}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <button type="button" className="secondary" disabled={busy} onClick={onDismiss}>
            Dismiss results
          </button>
        </div>
      ) : null}
    </>
  );
}
