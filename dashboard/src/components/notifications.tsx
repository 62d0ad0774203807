import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { Link } from 'react-router';
import { contractRequest } from '../api/client';
import { notificationPayload, safeActionPath, type Notification, type NotificationPage } from '../api/contract';
import { formatTime } from '../format';
import { EmptyState, Spinner } from './badges';

const POLL_MS = 10_000;
const UNREAD_PAGE = 100;

/**
 * Alerts are the notifications that say something went wrong: a job or a build
 * failed, a workflow was terminated automatically (docs/notifications.md).
 * Together with recoveries (a workflow up again after failed runs) they are the
 * state changes the drawer opens on. The rest (completed jobs and builds,
 * cancellations, terminations by the user) is routine, kept one click away so
 * it does not bury them.
 */
export const ALERT_KINDS: readonly Notification['kind'][] = ['WEB_ALERT', 'WEB_ERROR'];
export const RECOVERED_KIND: Notification['kind'] = 'WEB_RECOVERED';
const STATE_CHANGE_KINDS: readonly Notification['kind'][] = [...ALERT_KINDS, RECOVERED_KIND];
const ROUTINE_KINDS: readonly Notification['kind'][] = ['WEB_SUCCESS', 'WEB_INFO'];
const isAlert = (n: Notification) => ALERT_KINDS.includes(n.kind);
const isRecovery = (n: Notification) => n.kind === RECOVERED_KIND;

/** Unread notifications (the newest 100; "+" when there are more), alerts and recoveries counted apart. */
function useUnreadCount() {
  return useQuery({
    queryKey: ['notifications', 'unread'],
    queryFn: () => contractRequest<NotificationPage>('GET', `/notifications?unread=true&limit=${UNREAD_PAGE}`),
    refetchInterval: POLL_MS,
    select: (page) => {
      const unread = page.notifications.filter((n) => !n.read_at);
      return { count: unread.length, alerts: unread.filter(isAlert).length, recoveries: unread.filter(isRecovery).length, more: page.cursor !== '' };
    },
  });
}

/**
 * The bell: unread alerts in red; with none, unread recoveries in green; with
 * neither, unread routine ones in grey. The counter shows the most urgent of
 * them, the label names every count.
 */
export function NotificationsButton({ onOpen }: { onOpen: () => void }) {
  const unread = useUnreadCount();
  const count = unread.data?.count ?? 0;
  const alerts = unread.data?.alerts ?? 0;
  const recoveries = unread.data?.recoveries ?? 0;
  const more = unread.data?.more ? '+' : '';
  const label =
    count === 0
      ? 'Notifications, none unread'
      : `Notifications, ${alerts > 0 ? `${alerts} alert${alerts === 1 ? '' : 's'}, ` : ''}${recoveries > 0 ? `${recoveries} recovered, ` : ''}${count}${more} unread`;
  return (
    <button type="button" className="secondary bell" aria-label={label} onClick={onOpen}>
      <svg aria-hidden="true" width="18" height="18" viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="2" strokeLinecap="round" strokeLinejoin="round">
        <path d="M6 8a6 6 0 0 1 12 0c0 7 3 9 3 9H3s3-2 3-9" />
        <path d="M10.3 21a1.94 1.94 0 0 0 3.4 0" />
      </svg>
      {alerts > 0 ? (
        <span className="bell-count" aria-hidden="true" data-testid="unread-count">
          {alerts}
        </span>
      ) : recoveries > 0 ? (
        <span className="bell-count bell-count-recovered" aria-hidden="true" data-testid="unread-count">
          {recoveries}
        </span>
      ) : count > 0 ? (
        <span className="bell-count bell-count-routine" aria-hidden="true" data-testid="unread-count">
          {count}
          {more}
        </span>
      ) : null}
    </button>
  );
}

function NotificationItem({ n, onRead, busy, onNavigate }: { n: Notification; onRead: () => void; busy: boolean; onNavigate: () => void }) {
  const p = notificationPayload(n);
  const target = safeActionPath(p.action_url);
  const kind = n.kind.replace(/^WEB_/, '').toLowerCase();
  return (
    <li className={`notification notification-${kind}${n.read_at ? ' read' : ''}`}>
      <div className="notification-head">
        <span className="notification-title">
          {isRecovery(n) ? (
            // Said in words as well as in colour: the tag is what tells a recovery from a routine completion.
            <span className="badge badge-ok notification-tag">
              <svg aria-hidden="true" width="12" height="12" viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="3" strokeLinecap="round" strokeLinejoin="round">
                <path d="M12 19V5M5 12l7-7 7 7" />
              </svg>
              recovered
            </span>
          ) : null}
          <strong>{p.title ?? 'Notification'}</strong>
        </span>
        <time dateTime={n.created_at}>{formatTime(n.created_at)}</time>
      </div>
      {p.message ? <p>{p.message}</p> : null}
      <div className="row">
        {target ? (
          <Link to={target} onClick={onNavigate}>
            Open
          </Link>
        ) : null}
        {n.read_at ? (
          <span className="muted">Read</span>
        ) : (
          <button type="button" className="link" disabled={busy} onClick={onRead}>
            Mark read
          </button>
        )}
      </div>
    </li>
  );
}

const VIEWS = [
  ['alerts', 'Alerts', STATE_CHANGE_KINDS],
  ['routine', 'Everything else', ROUTINE_KINDS],
  ['all', 'All', undefined],
] as const;
type View = (typeof VIEWS)[number][0];

/** The drawer's list for a view: the api filters by kind, so routine ones never push alerts off a page. */
function listPath(kinds: readonly string[] | undefined, cursor: string): string {
  const params = new URLSearchParams();
  if (kinds) params.set('kind', kinds.join(','));
  if (cursor) params.set('cursor', cursor);
  const q = params.toString();
  return `/notifications${q ? `?${q.replace(/%2C/g, ',')}` : ''}`;
}

/** A side panel (modal dialog): state changes first (failures, automatic terminations, recoveries), everything else one click away; mark one or all read. */
export function NotificationsDrawer({ onClose }: { onClose: () => void }) {
  const client = useQueryClient();
  const panel = useRef<HTMLDivElement>(null);
  const [view, setView] = useState<View>('alerts');
  const kinds = VIEWS.find((v) => v[0] === view)![2];
  const list = useInfiniteQuery({
    queryKey: ['notifications', 'list', view],
    queryFn: ({ pageParam }) => contractRequest<NotificationPage>('GET', listPath(kinds, pageParam)),
    initialPageParam: '',
    getNextPageParam: (last) => last.cursor || undefined,
    refetchInterval: POLL_MS,
  });
  const markRead = useMutation({
    mutationFn: (ids: string[]) => contractRequest<void>('PUT', '/notifications', { ids }),
    onSettled: () => client.invalidateQueries({ queryKey: ['notifications'] }),
  });

  useEffect(() => {
    panel.current?.focus();
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && onClose();
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [onClose]);

  const all = list.data?.pages.flatMap((p) => p.notifications) ?? [];
  const unread = all.filter((n) => !n.read_at).map((n) => n.id);

  return (
    <div className="drawer-backdrop" onClick={onClose}>
      <div
        className="drawer"
        role="dialog"
        aria-modal="true"
        aria-labelledby="notifications-title"
        tabIndex={-1}
        ref={panel}
        onClick={(e) => e.stopPropagation()}
      >
        <div className="drawer-head">
          <h2 id="notifications-title">Notifications</h2>
          <button type="button" className="secondary" disabled={unread.length === 0 || markRead.isPending} onClick={() => markRead.mutate(unread.slice(0, 1000))}>
            Mark all read
          </button>
          <button type="button" className="link" aria-label="Close notifications" onClick={onClose}>
            ×
          </button>
        </div>
        <div className="segmented" role="group" aria-label="Show">
          {VIEWS.map(([id, text]) => (
            <button key={id} type="button" className={view === id ? 'selected' : 'secondary'} aria-pressed={view === id} onClick={() => setView(id)}>
              {text}
            </button>
          ))}
        </div>
        {list.isPending ? (
          <Spinner />
        ) : all.length === 0 ? (
          view === 'alerts' ? (
            <EmptyState title="No alerts">
              <p>Failed jobs and builds, automatic terminations and recoveries show up here; completed runs are under Everything else.</p>
            </EmptyState>
          ) : (
            <EmptyState title="No notifications yet">
              <p>Builds, finished jobs and terminated workflows show up here.</p>
            </EmptyState>
          )
        ) : (
          <ul className="notifications">
            {all.map((n) => (
              <NotificationItem key={n.id} n={n} busy={markRead.isPending} onRead={() => markRead.mutate([n.id])} onNavigate={onClose} />
            ))}
          </ul>
        )}
        {list.hasNextPage ? (
          <button type="button" className="secondary" disabled={list.isFetchingNextPage} onClick={() => void list.fetchNextPage()}>
            Load older
          </button>
        ) : null}
      </div>
    </div>
  );
}
