import { useSyncExternalStore } from 'react';

export interface Toast {
  id: number;
  kind: 'error' | 'success' | 'info';
  message: string;
}

/**
 * A tiny store of toasts, usable from outside React (the query cache's error
 * handler) and read by <Toasts/>. Each toast leaves after a while or when
 * dismissed; errors stay longer.
 */
class ToastStore {
  private toasts: Toast[] = [];
  private listeners = new Set<() => void>();
  private next = 1;

  subscribe = (listener: () => void) => {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  };

  snapshot = () => this.toasts;

  push(kind: Toast['kind'], message: string): void {
    // The same message twice in a row (a refetch failing again) shows once.
    if (this.toasts.some((t) => t.message === message && t.kind === kind)) return;
    const toast = { id: this.next++, kind, message };
    this.set([...this.toasts.slice(-4), toast]);
    setTimeout(() => this.dismiss(toast.id), kind === 'error' ? 10_000 : 5_000);
  }

  dismiss(id: number): void {
    if (this.toasts.some((t) => t.id === id)) this.set(this.toasts.filter((t) => t.id !== id));
  }

  private set(next: Toast[]): void {
    this.toasts = next;
    for (const l of this.listeners) l();
  }
}

export const toasts = new ToastStore();

export function Toasts() {
  const list = useSyncExternalStore(toasts.subscribe, toasts.snapshot);
  return (
    <div className="toasts" aria-live="polite">
      {list.map((t) => (
        <div key={t.id} className={`toast toast-${t.kind}`} role={t.kind === 'error' ? 'alert' : 'status'}>
          <span>{t.message}</span>
          <button type="button" className="link" aria-label="Dismiss" onClick={() => toasts.dismiss(t.id)}>
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
