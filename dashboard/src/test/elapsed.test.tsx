import { act, render, screen } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Elapsed } from '../components/elapsed';

describe('Elapsed', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-12-01T10:00:05Z'));
  });
  afterEach(() => vi.useRealTimers());

  it("counts a running job's time up every second", () => {
    render(<Elapsed since="2026-12-01T10:00:00Z" />);
    expect(screen.getByText('5s so far')).toBeTruthy();
    act(() => vi.advanceTimersByTime(60_000));
    expect(screen.getByText('1m 5s so far')).toBeTruthy();
  });
});
