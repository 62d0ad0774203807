import type { ReactNode } from 'react';
import { Link } from 'react-router';

const TONE: Record<string, string> = {
  COMPLETED: 'ok',
  FAILED: 'bad',
  CANCELED: 'muted',
  RUNNING: 'busy',
  STARTED: 'busy',
  QUEUED: 'wait',
  PENDING: 'wait',
  TERMINATED: 'muted',
  ACTIVE: 'ok',
};

/** A state as a coloured label; the text carries the meaning, the colour only helps. */
export function StatusBadge({ status, label }: { status: string; label?: string }) {
  return <span className={`badge badge-${TONE[status] ?? 'muted'}`}>{label ?? status.toLowerCase()}</span>;
}

export function Spinner({ label = 'Loading…' }: { label?: string }) {
  return (
    <p className="loading" role="status">
      <span className="spinner" aria-hidden="true" /> {label}
    </p>
  );
}

export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <p className="empty-title">{title}</p>
      {children}
    </div>
  );
}

/** A page whose data could not be loaded: what the api said, and a way back. */
export function LoadFailed({ title, error, back }: { title: string; error: Error; back: { to: string; label: string } }) {
  return (
    <div>
      <h1>{title}</h1>
      <p className="error-text">{error.message}</p>
      <Link to={back.to}>{back.label}</Link>
    </div>
  );
}
