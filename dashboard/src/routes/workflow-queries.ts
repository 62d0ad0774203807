import { useQuery } from '@tanstack/react-query';
import { api, call, isBuilding } from '../api/client';

/** One workflow; polled while its build is under way so the page follows it. */
export function useWorkflow(workflowId: string) {
  return useQuery({
    queryKey: ['workflows', 'one', workflowId],
    queryFn: () => call(api.GET('/workflows/{workflow_id}', { params: { path: { workflow_id: workflowId } } })),
    refetchInterval: (q) => (q.state.data && isBuilding(q.state.data.build_status) && !q.state.data.terminated_at ? 1_500 : false),
  });
}
