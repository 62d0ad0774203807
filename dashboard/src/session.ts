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
    return remember(await call(api.POST('/auth/validate')));
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) return remember(null);
    throw err;
  }
}

const SIGNED_IN_HINT = 'orloj.signed-in';

/** Notes (not a secret: a hint) whether this browser was last seen signed in. */
function remember<T extends Session | null>(session: T): T {
  try {
    if (session) localStorage.setItem(SIGNED_IN_HINT, '1');
    else localStorage.removeItem(SIGNED_IN_HINT);
  } catch {
    // storage unavailable: no hint, the page just waits for the check
  }
  return session;
}

/**
 * Whether this browser was signed in when last seen, before the session check
 * answers: the first page's data is then asked for at once, beside the check,
 * rather than after it (app.tsx); a signed-out visitor causes no request that would 401.
 */
export function probablySignedIn(): boolean {
  try {
    return localStorage.getItem(SIGNED_IN_HINT) === '1';
  } catch {
    return false;
  }
}

export function useSession() {
  return useQuery({ queryKey: SESSION_KEY, queryFn: validate, staleTime: Infinity, retry: false, meta: { silent: true } });
}

/** After sign-in, sign-out or a 401 anywhere: the new state, and no data of the previous user left behind. */
export function setSession(client: QueryClient, session: Session | null): void {
  client.removeQueries({ predicate: (q) => q.queryKey[0] !== SESSION_KEY[0] });
  client.setQueryData(SESSION_KEY, remember(session));
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
