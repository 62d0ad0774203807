import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Notification } from '../api/contract';
import { NotificationsButton, NotificationsDrawer } from '../components/notifications';
import { renderWithProviders } from './render';

function notification(id: string, payload: object, read = false, kind: Notification['kind'] = 'WEB_SUCCESS'): Notification {
  return {
    id,
    kind,
    payload: JSON.stringify(payload),
    ...(read ? { read_at: '2026-11-01T10:05:00.000Z' } : {}),
    created_at: '2026-11-01T10:00:00.000Z',
    updated_at: '2026-11-01T10:00:00.000Z',
  };
}

/** GET (with the unread and kind filters) and PUT /notifications, over a list the test owns. */
function fakeApi(list: Notification[]) {
  const puts: unknown[] = [];
  const gets: string[] = [];
  const fetch = vi.fn(async (url: string, init?: RequestInit) => {
    if (init?.method === 'PUT') {
      const { ids } = JSON.parse(String(init.body)) as { ids: string[] };
      puts.push(ids);
      for (const n of list) if (ids.includes(n.id)) n.read_at ??= '2026-11-01T11:00:00.000Z';
      return new Response(null, { status: 204 });
    }
    const u = new URL(url, 'http://dashboard.test');
    expect(u.pathname).toBe('/api/notifications');
    gets.push(u.search);
    const kinds = u.searchParams.get('kind')?.split(',');
    const unread = u.searchParams.get('unread') === 'true';
    const shown = list.filter((n) => (!kinds || kinds.includes(n.kind)) && (!unread || !n.read_at));
    return Response.json({ notifications: shown, cursor: '' });
  });
  vi.stubGlobal('fetch', fetch);
  return { fetch, puts, gets };
}

describe('notifications', () => {
  beforeEach(() => vi.unstubAllGlobals());
  afterEach(() => vi.unstubAllGlobals());

  it('counts unread notifications on the bell', async () => {
    fakeApi([notification('a', { title: 'A' }), notification('b', { title: 'B' }), notification('c', { title: 'C' }, true)]);
    renderWithProviders(<NotificationsButton onOpen={() => {}} />);
    expect(await screen.findByRole('button', { name: 'Notifications, 2 unread' })).toBeTruthy();
    expect(screen.getByTestId('unread-count').textContent).toBe('2');
  });

  it('counts unread alerts apart, in red, ahead of routine ones', async () => {
    fakeApi([
      notification('a', { title: 'Job completed' }),
      notification('b', { title: 'Job failed' }, false, 'WEB_ERROR'),
      notification('c', { title: 'Workflow terminated automatically' }, false, 'WEB_ALERT'),
      notification('d', { title: 'Job failed' }, true, 'WEB_ERROR'),
    ]);
    renderWithProviders(<NotificationsButton onOpen={() => {}} />);
    expect(await screen.findByRole('button', { name: 'Notifications, 2 alerts, 3 unread' })).toBeTruthy();
    expect(screen.getByTestId('unread-count').textContent).toBe('2');
    expect(screen.getByTestId('unread-count').className).not.toContain('routine');
  });

  it('opens on alerts, asking the api for them only, with everything else one click away', async () => {
    const { gets } = fakeApi([
      notification('a', { title: 'Job completed' }),
      notification('b', { title: 'Workflow terminated automatically' }, false, 'WEB_ALERT'),
    ]);
    const user = userEvent.setup();
    renderWithProviders(<NotificationsDrawer onClose={() => {}} />);
    const drawer = await screen.findByRole('dialog', { name: 'Notifications' });
    await within(drawer).findByText('Workflow terminated automatically');
    expect(within(drawer).queryByText('Job completed')).toBeNull();
    // The state changes: alerts and recoveries.
    expect(gets).toContain('?kind=WEB_ALERT,WEB_ERROR,WEB_RECOVERED');
    await user.click(within(drawer).getByRole('button', { name: 'Everything else' }));
    await within(drawer).findByText('Job completed');
    expect(within(drawer).queryByText('Workflow terminated automatically')).toBeNull();
  });

  it('counts unread recoveries in green when nothing is failing, and names them in the label', async () => {
    fakeApi([
      notification('a', { title: 'Job completed' }),
      notification('b', { title: 'Workflow recovered' }, false, 'WEB_RECOVERED'),
      notification('c', { title: 'Workflow recovered' }, true, 'WEB_RECOVERED'),
    ]);
    renderWithProviders(<NotificationsButton onOpen={() => {}} />);
    expect(await screen.findByRole('button', { name: 'Notifications, 1 recovered, 2 unread' })).toBeTruthy();
    expect(screen.getByTestId('unread-count').textContent).toBe('1');
    expect(screen.getByTestId('unread-count').className).toContain('bell-count-recovered');
  });

  it('keeps the red alert count ahead of recoveries', async () => {
    fakeApi([
      notification('a', { title: 'Job failed' }, false, 'WEB_ERROR'),
      notification('b', { title: 'Workflow recovered' }, false, 'WEB_RECOVERED'),
    ]);
    renderWithProviders(<NotificationsButton onOpen={() => {}} />);
    expect(await screen.findByRole('button', { name: 'Notifications, 1 alert, 1 recovered, 2 unread' })).toBeTruthy();
    expect(screen.getByTestId('unread-count').textContent).toBe('1');
    expect(screen.getByTestId('unread-count').className).toBe('bell-count');
  });

  it('lists a recovery among the state changes, tagged "recovered", not among routine ones', async () => {
    fakeApi([
      notification('a', { title: 'Job completed' }),
      notification('b', { title: 'Workflow recovered', message: 'Workflow "api" is up again.' }, false, 'WEB_RECOVERED'),
      notification('c', { title: 'Job failed' }, false, 'WEB_ERROR'),
    ]);
    const user = userEvent.setup();
    renderWithProviders(<NotificationsDrawer onClose={() => {}} />);
    const drawer = await screen.findByRole('dialog', { name: 'Notifications' });
    const item = (await within(drawer).findByText('Workflow recovered')).closest('li')!;
    expect(item.className).toContain('notification-recovered');
    expect(within(item).getByText('recovered')).toBeTruthy();
    expect(within(drawer).getByText('Job failed')).toBeTruthy();
    expect(within(drawer).queryByText('Job completed')).toBeNull();
    // only the recovery carries the tag
    expect(within(drawer).getAllByText('recovered')).toHaveLength(1);
    await user.click(within(drawer).getByRole('button', { name: 'Everything else' }));
    await within(drawer).findByText('Job completed');
    expect(within(drawer).queryByText('Workflow recovered')).toBeNull();
  });

  it('lists notifications with their text and link, and marks one or all read', async () => {
    const list = [
      notification('0190a5b2-0000-7000-8000-000000000001', {
        title: 'Job completed',
        message: 'nightly finished in 20s.',
        action_url: '/workflows/w1/jobs/j1',
      }),
      notification('0190a5b2-0000-7000-8000-000000000002', { title: 'Build failed', action_url: 'https://evil.example/' }),
    ];
    const { puts } = fakeApi(list);
    const user = userEvent.setup();
    renderWithProviders(<NotificationsDrawer onClose={() => {}} />);
    const drawer = await screen.findByRole('dialog', { name: 'Notifications' });
    await user.click(within(drawer).getByRole('button', { name: 'All' }));
    await within(drawer).findByText('Job completed');
    expect(within(drawer).getByText('nightly finished in 20s.')).toBeTruthy();
    // only same-origin app paths become links
    expect(within(drawer).getAllByRole('link').map((a) => a.getAttribute('href'))).toEqual(['/workflows/w1/jobs/j1']);

    await user.click(within(drawer).getAllByRole('button', { name: 'Mark read' })[0]!);
    await waitFor(() => expect(puts).toEqual([['0190a5b2-0000-7000-8000-000000000001']]));
    await waitFor(() => expect(within(drawer).getAllByRole('button', { name: 'Mark read' })).toHaveLength(1));
    await user.click(within(drawer).getByRole('button', { name: 'Mark all read' }));
    await waitFor(() => expect(puts[1]).toEqual(['0190a5b2-0000-7000-8000-000000000002']));
    await waitFor(() => expect(within(drawer).queryByRole('button', { name: 'Mark read' })).toBeNull());
  });

  it('closes on Escape and says when there is nothing', async () => {
    fakeApi([]);
    const onClose = vi.fn();
    renderWithProviders(<NotificationsDrawer onClose={onClose} />);
    await screen.findByText('No alerts');
    await userEvent.keyboard('{Escape}');
    expect(onClose).toHaveBeenCalled();
  });
});
