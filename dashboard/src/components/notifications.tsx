import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { Link } from 'react-router';
import { api, call, type Notification } from '../api/client';
import { notificationPayload, safeActionPath, type StateChange } from '../api/notification-payload';
import { formatTime } from '../format';
import { EmptyState, Spinner } from './badges';
import { OpenIncidents, useOpenIncidents } from './incidents';
import { SnoozeChoices } from './snooze';

const POLL_MS = 10_000;
const UNREAD_PAGE = 100;

/**
 * State changes are the notifications that say a workflow's state changed
 * (docs/notifications.md, "State changes"): the failure that turned it down,
 * its automatic termination, a failed build (together, the alerts) and its
 * recovery. The api marks them (`state_change` in the payload) and lists
 * them apart (`state_change=true`), so the bell and the drawer's first view
 * ask for them alone. The rest — completed jobs and builds, failures of a
 * workflow already down, cancellations, terminations by the user — is
 * routine, kept one click away so it does not bury them.
 */
const stateChangeOf = (n: Notification) => notificationPayload(n).state_change;
const isRecovery = (n: Notification) => stateChangeOf(n) === 'recovered';

/** Words for each state change, said beside the title (not in colour alone). */
const CHANGE_TAGS: Record<StateChange, { text: string; tone: 'ok' | 'bad'; arrow?: 'up' | 'down' }> = {
  down: { text: 'down', tone: 'bad', arrow: 'down' },
  recovered: { text: 'recovered', tone: 'ok', arrow: 'up' },
  terminated: { text: 'terminated', tone: 'bad' },
  build_failed: { text: 'build failed', tone: 'bad' },
};
const changeTag = (n: Notification) => {
  const change = stateChangeOf(n);
  return change && Object.hasOwn(CHANGE_TAGS, change) ? { change: change as StateChange, ...CHANGE_TAGS[change as StateChange] } : undefined;
};

const unreadPage = (stateChange: boolean) => call(api.GET('/notifications', { params: { query: { unread: true, state_change: stateChange, limit: UNREAD_PAGE } } }));

/**
 * Unread notifications, counted by the api's filter: the unread state changes
 * (alerts and recoveries apart) and the unread rest, each up to 100 ("+" when
 * there are more), so a flood of routine ones never hides a state change.
 */
function useUnreadCount() {
  const changes = useQuery({
    queryKey: ['notifications', 'unread', 'changes'],
    queryFn: () => unreadPage(true),
    refetchInterval: POLL_MS,
    select: (page) => {
      const recoveries = page.notifications.filter(isRecovery).length;
      return { alerts: page.notifications.length - recoveries, recoveries, more: page.cursor !== '' };
    },
  });
  const rest = useQuery({
    queryKey: ['notifications', 'unread', 'rest'],
    queryFn: () => unreadPage(false),
    refetchInterval: POLL_MS,
    select: (page) => ({ count: page.notifications.length, more: page.cursor !== '' }),
  });
  const alerts = changes.data?.alerts ?? 0;
  const recoveries = changes.data?.recoveries ?? 0;
  return {
    alerts,
    recoveries,
    changesMore: changes.data?.more ?? false,
    count: alerts + recoveries + (rest.data?.count ?? 0),
    more: (changes.data?.more ?? false) || (rest.data?.more ?? false),
  };
}

/**
 * The bell: unread alerts (down, terminated, build failed) in red; with none,
 * unread recoveries in green; with neither, the other unread ones in grey.
 * The counter shows the most urgent of them, the label names every count.
 */
export function NotificationsButton({ onOpen }: { onOpen: () => void }) {
  const { alerts, recoveries, count, changesMore, more: anyMore } = useUnreadCount();
  const incidents = useOpenIncidents().data?.waiting.length ?? 0;
  const more = anyMore ? '+' : '';
  const label =
    (count === 0
      ? 'Notifications, none unread'
      : `Notifications, ${alerts > 0 ? `${alerts}${changesMore ? '+' : ''} alert${alerts === 1 ? '' : 's'}, ` : ''}${recoveries > 0 ? `${recoveries} recovered, ` : ''}${count}${more} unread`) +
    (incidents > 0 ? `, ${incidents} open incident${incidents === 1 ? '' : 's'}` : '');
  return (
    <button type="button" className="secondary bell" aria-label={label} onClick={onOpen}>
      <svg aria-hidden="true" width="18" height="18" viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="2" strokeLinecap="round" strokeLinejoin="round">
        <path d="M6 8a6 6 0 0 1 12 0c0 7 3 9 3 9H3s3-2 3-9" />
        <path d="M10.3 21a1.94 1.94 0 0 0 3.4 0" />
      </svg>
      {alerts > 0 ? (
        <span className="bell-count" aria-hidden="true" data-testid="unread-count">
          {alerts}
          {changesMore ? '+' : ''}
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

function Arrow({ to }: { to: 'up' | 'down' }) {
  return (
    <svg aria-hidden="true" width="12" height="12" viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="3" strokeLinecap="round" strokeLinejoin="round">
      <path d={to === 'up' ? 'M12 19V5M5 12l7-7 7 7' : 'M12 5v14M5 12l7 7 7-7'} />
    </svg>
  );
}

function NotificationItem({ n, onRead, busy, onNavigate }: { n: Notification; onRead: () => void; busy: boolean; onNavigate: () => void }) {
  const p = notificationPayload(n);
  const target = safeActionPath(p.action_url);
  const kind = n.kind.replace(/^WEB_/, '').toLowerCase();
  const tag = changeTag(n);
  const changeClass = tag ? ` notification-change notification-${tag.change.replace('_', '-')}` : '';
  return (
    <li className={`notification notification-${kind}${changeClass}${n.read_at ? ' read' : ''}`}>
      <div className="notification-head">
        <span className="notification-title">
          {tag ? (
            // Said in words as well as in colour: the tag is what tells a state change from a routine notification.
            <span className={`badge badge-${tag.tone} notification-tag`}>
              {tag.arrow ? <Arrow to={tag.arrow} /> : null}
              {tag.text}
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
        {tag && p.workflow_id ? <SnoozeChoices workflowId={p.workflow_id} /> : null}
      </div>
    </li>
  );
}

const VIEWS = [
  ['changes', 'State changes', true],
  ['routine', 'Everything else', false],
  ['all', 'All', undefined],
] as const;
type View = (typeof VIEWS)[number][0];

/**
 * The drawer's list for a view: a history, read ones included (the api lists
 * unread ones only unless asked); the api filters state changes, so routine
 * ones never push them off a page.
 */
function listPage(stateChange: boolean | undefined, cursor: string) {
  return call(api.GET('/notifications', { params: { query: { include_read: true, state_change: stateChange, cursor: cursor || undefined } } }));
}

/** A side panel (modal dialog): state changes first (down, recovered, terminated automatically, build failed), everything else one click away; mark one or all read. */
export function NotificationsDrawer({ onClose }: { onClose: () => void }) {
  const client = useQueryClient();
  const panel = useRef<HTMLDivElement>(null);
  const [view, setView] = useState<View>('changes');
  const stateChange = VIEWS.find((v) => v[0] === view)![2];
  const list = useInfiniteQuery({
    queryKey: ['notifications', 'list', view],
    queryFn: ({ pageParam }) => listPage(stateChange, pageParam),
    initialPageParam: '',
    getNextPageParam: (last) => last.cursor || undefined,
    refetchInterval: POLL_MS,
  });
  const markRead = useMutation({
    mutationFn: (ids: string[]) => call(api.PUT('/notifications', { body: { ids } })),
    onSettled: () => client.invalidateQueries({ queryKey: ['notifications'] }),
  });

  // Focus moves into the dialog once, and back to what opened it (the bell) when it closes,
  // however it closes; before, Escape left focus on the page body.
  useEffect(() => {
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    panel.current?.focus();
    return () => opener?.focus();
  }, []);
  useEffect(() => {
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
        {/* The inbox (issue 26): open incidents first, then state changes, then the routine rest. */}
        <OpenIncidents onNavigate={onClose} />
        <h3 className="inbox-section">Notifications</h3>
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
          view === 'changes' ? (
            <EmptyState title="No state changes">
              <p>A workflow going down or recovering, an automatic termination or a failed build shows up here; every other notification is under Everything else.</p>
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
