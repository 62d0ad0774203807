import { useSyncExternalStore } from 'react';
import type { QueryClient } from '@tanstack/react-query';

/**
 * Whether the server answers. A request that got no answer at all (status 0)
 * marks the app disconnected; any answer marks it connected again. While
 * disconnected, the queries on screen are retried every few seconds, so the
 * app comes back by itself; what they last showed stays on screen meanwhile.
 */
const RETRY_MS = 3_000;

let disconnected = false;
let retry: ReturnType<typeof setInterval> | undefined;
const listeners = new Set<() => void>();

function set(value: boolean, client: QueryClient): void {
  if (disconnected === value) return;
  disconnected = value;
  clearInterval(retry);
  retry = value ? setInterval(() => void client.refetchQueries({ type: 'active' }), RETRY_MS) : undefined;
  for (const l of listeners) l();
}

export const connection = {
  lost: (client: QueryClient) => set(true, client),
  answered: (client: QueryClient) => set(false, client),
};

export function useDisconnected(): boolean {
  return useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => disconnected,
  );
}
