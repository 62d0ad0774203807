import { useEffect, useState } from 'react';
import { formatSeconds } from '../format';

/** The time since `since` (an ISO date-time), counted up every second while shown: a running job's duration so far. */
export function Elapsed({ since }: { since: string }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(timer);
  }, []);
  return <span className="elapsed">{formatSeconds(Math.max(0, now - Date.parse(since)) / 1000)} so far</span>;
}
