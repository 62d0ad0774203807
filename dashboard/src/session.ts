import { useQuery, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { api, call } from './api/client';
import { ApiError } from './api/problem';

export const SESSION_KEY = ['session'] as const;

export interface Session {
  email: string;
}

/**
 * Session bootstrap: the cookies are HttpOnly, so the only way to know
 * whether they hold a live session is to ask (`POST /auth/validate`).
 * 401 (no or dead session) and 403 (a stale CSRF cookie) both mean signed out.
 */
async function validate(): Promise<Session | null> {
  try {
    return await call(api.POST('/auth/validate'));
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) return null;
    throw err;
  }
}

export function useSession() {
  return useQuery({ queryKey: SESSION_KEY, queryFn: validate, staleTime: Infinity, retry: false, meta: { silent: true } });
}

/** After sign-in, sign-out or a 401 anywhere: the new state, and no data of the previous user left behind. */
export function setSession(client: QueryClient, session: Session | null): void {
  client.removeQueries({ predicate: (q) => q.queryKey[0] !== SESSION_KEY[0] });
  client.setQueryData(SESSION_KEY, session);
}

export function useSignOut() {
  const client = useQueryClient();
  return async () => {
    try {
      await call(api.POST('/auth/logout'));
    } catch (err) {
      // Already signed out is signed out.
      if (!(err instanceof ApiError && err.status === 401)) throw err;
    }
    setSession(client, null);
  };
}
