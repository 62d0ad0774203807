import { MutationCache, QueryCache, QueryClient } from '@tanstack/react-query';
import { ApiError, messageOf } from './api/problem';
import { toasts } from './components/toasts';
import { connection } from './connection';
import { SESSION_KEY, setSession } from './session';

declare module '@tanstack/react-query' {
  interface Register {
    queryMeta: { silent?: boolean };
    mutationMeta: { silent?: boolean };
  }
}

/**
 * One error policy for every request: a 401 means the session is gone (back
 * to the sign-in page, nothing of the user kept); anything else is shown as a
 * toast with the api's own message, unless the caller shows it itself
 * (`meta.silent`).
 */
export function createQueryClient(): QueryClient {
  const onError = (error: unknown, silent: boolean | undefined) => {
    // No answer at all: the lasting "disconnected" banner says so (connection.ts), not a toast per request.
    if (error instanceof ApiError && error.status === 0) {
      connection.lost(client);
      return;
    }
    connection.answered(client);
    if (error instanceof ApiError && error.status === 401) {
      if (client.getQueryData(SESSION_KEY)) toasts.push('info', 'Your session has ended; sign in again.');
      setSession(client, null);
      return;
    }
    if (!silent) toasts.push('error', messageOf(error));
  };
  const client: QueryClient = new QueryClient({
    queryCache: new QueryCache({ onError: (error, query) => onError(error, query.meta?.silent), onSuccess: () => connection.answered(client) }),
    mutationCache: new MutationCache({
      onError: (error, _v, _c, mutation) => onError(error, mutation.meta?.silent),
      onSuccess: () => connection.answered(client),
    }),
    defaultOptions: {
      queries: {
        staleTime: 5_000,
        // Refused requests are answers, not accidents: retry only what may pass next time.
        retry: (count, error) => count < 2 && (!(error instanceof ApiError) || error.retryable),
        refetchOnWindowFocus: true,
      },
    },
  });
  return client;
}
