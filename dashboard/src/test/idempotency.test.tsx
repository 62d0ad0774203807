import { renderHook } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { randomKey, useIdempotencyKey } from '../api/idempotency';

describe('useIdempotencyKey', () => {
  it('reuses the key for a retry of the same request, and makes a new one for another request or once settled', () => {
    const { result } = renderHook(() => useIdempotencyKey());
    const first = result.current.keyFor('{"name":"a"}');
    expect(result.current.keyFor('{"name":"a"}')).toBe(first);
    const other = result.current.keyFor('{"name":"b"}');
    expect(other).not.toBe(first);
    result.current.settled();
    expect(result.current.keyFor('{"name":"b"}')).not.toBe(other);
  });

  it('makes version 4 UUIDs without needing a secure context', () => {
    const keys = new Set(Array.from({ length: 100 }, randomKey));
    expect(keys.size).toBe(100);
    for (const k of keys) expect(k).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
