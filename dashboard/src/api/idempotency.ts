import { useCallback, useRef } from 'react';

/**
 * A random UUID (v4). crypto.randomUUID exists only in secure contexts, and
 * orloj may be served over plain http on a private network.
 */
export function randomKey(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * Idempotency-Key handling for one logical request: the same request sent
 * again (a retry after a timeout, a 5xx, a lost answer) reuses its key, so the
 * api answers with the first result instead of acting twice; a different
 * request (another body) gets a new key. `settled` forgets the key once the
 * request got a definite answer.
 */
export function useIdempotencyKey(): { keyFor: (request: string) => string; settled: () => void } {
  const current = useRef<{ request: string; key: string } | null>(null);
  const keyFor = useCallback((request: string) => {
    if (current.current?.request !== request) current.current = { request, key: randomKey() };
    return current.current.key;
  }, []);
  const settled = useCallback(() => {
    current.current = null;
  }, []);
  return { keyFor, settled };
}
