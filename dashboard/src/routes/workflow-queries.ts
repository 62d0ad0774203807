import { useQuery } from '@tanstack/react-query';
import { api, call, isBuilding } from '../api/client';

/**
 * One workflow with its health (state, recent runs, uptime); polled quickly while its
 * build is under way so the page follows it, and every 15 s while it runs.
 */
export function useWorkflow(workflowId: string) {
  return useQuery({
    queryKey: ['workflows', 'one', workflowId],
    queryFn: () => call(api.GET('/workflows/{workflow_id}', { params: { path: { workflow_id: workflowId }, query: { include: 'health' } } })),
    refetchInterval: (q) => (!q.state.data || q.state.data.terminated_at ? false : isBuilding(q.state.data.build_status) ? 1_500 : 15_000),
  });
}
