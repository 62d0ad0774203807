import { useEffect, useRef } from 'react';

/**
 * The end of an infinite list: loads the next page when it scrolls into view
 * (where IntersectionObserver exists), and is a button for keyboards and
 * everyone else.
 */
export function LoadMore({ hasMore, loading, onLoad, label = 'Load more' }: { hasMore: boolean; loading: boolean; onLoad: () => void; label?: string }) {
  const ref = useRef<HTMLButtonElement>(null);
  const latest = useRef(onLoad);
  useEffect(() => {
    latest.current = onLoad;
  });
  useEffect(() => {
    const el = ref.current;
    if (!el || !hasMore || typeof IntersectionObserver === 'undefined') return;
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) latest.current();
    });
    observer.observe(el);
    return () => observer.disconnect();
  }, [hasMore]);
  if (!hasMore) return null;
  return (
    <button ref={ref} type="button" className="secondary load-more" disabled={loading} onClick={onLoad}>
      {loading ? 'Loading…' : label}
    </button>
  );
}
