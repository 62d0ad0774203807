import { useQueryClient } from '@tanstack/react-query';
import { Link, useNavigate, useParams } from 'react-router';
import { api, call } from '../api/client';
import { useIdempotencyKey } from '../api/idempotency';
import { ApiError } from '../api/problem';
import { Spinner } from '../components/badges';
import { toasts } from '../components/toasts';
import { WorkflowForm } from '../components/workflow-form';
import { valuesFromWorkflow, type WorkflowRequest } from '../components/workflow-payload';
import { useTitle } from '../components/use-title';
import { useWorkflow } from './workflow-queries';

/**
 * Sends an idempotent request: the key is kept while the answer may still
 * change (network error, 429, 5xx) so a retry cannot act twice, and dropped
 * once the api gave a definite answer.
 */
function useIdempotentSubmit<T>(send: (request: WorkflowRequest, key: string) => Promise<T>) {
  const { keyFor, settled } = useIdempotencyKey();
  return async (request: WorkflowRequest): Promise<T> => {
    try {
      const result = await send(request, keyFor(JSON.stringify(request)));
      settled();
      return result;
    } catch (err) {
      if (!(err instanceof ApiError && err.retryable)) settled();
      throw err;
    }
  };
}

export function NewWorkflowPage() {
  useTitle('New workflow');
  const navigate = useNavigate();
  const client = useQueryClient();
  const create = useIdempotentSubmit((body, key) => call(api.POST('/workflows', { params: { header: { 'Idempotency-Key': key } }, body })));
  return (
    <div>
      <p className="crumbs">
        <Link to="/workflows">Workflows</Link> /
      </p>
      <h1>New workflow</h1>
      <WorkflowForm
        mode="create"
        onCancel={() => navigate('/workflows')}
        onSubmit={async (request) => {
          const { id } = await create(request);
          await client.invalidateQueries({ queryKey: ['workflows'] });
          toasts.push('success', `Workflow "${request.name}" created.`);
          navigate(`/workflows/${id}`);
        }}
      />
    </div>
  );
}

export function EditWorkflowPage() {
  const { workflowId = '' } = useParams();
  const navigate = useNavigate();
  const client = useQueryClient();
  const workflow = useWorkflow(workflowId);
  useTitle(workflow.data ? `Edit ${workflow.data.name}` : 'Edit workflow');
  const update = useIdempotentSubmit(({ kind: _kind, ...body }, key) =>
    call(api.PUT('/workflows/{workflow_id}', { params: { path: { workflow_id: workflowId }, header: { 'Idempotency-Key': key } }, body })),
  );
  if (workflow.isPending) return <Spinner />;
  if (workflow.isError && !workflow.data) return <p className="error-text">{workflow.error.message}</p>;
  const w = workflow.data;
  return (
    <div>
      <p className="crumbs">
        <Link to="/workflows">Workflows</Link> / <Link to={`/workflows/${w.id}`}>{w.name}</Link> /
      </p>
      <h1>Edit workflow</h1>
      {w.terminated_at ? <p className="note">This workflow is terminated; saving it reactivates it and rebuilds it.</p> : null}
      <WorkflowForm
        key={w.id}
        mode="edit"
        initial={valuesFromWorkflow(w)}
        onCancel={() => navigate(`/workflows/${w.id}`)}
        onSubmit={async (request) => {
          await update(request);
          await client.invalidateQueries({ queryKey: ['workflows'] });
          toasts.push('success', 'Changes saved.');
          navigate(`/workflows/${w.id}`);
        }}
      />
    </div>
  );
}
