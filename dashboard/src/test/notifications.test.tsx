import { useState } from 'react';
import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import type { Notification } from '../api/client';
import { NotificationsButton, NotificationsDrawer } from '../components/notifications';
import { fakeApi } from './fake-api';
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

const changeOf = (n: Notification) => (JSON.parse(n.payload) as { state_change?: string }).state_change;

/**
 * GET (with the include_read, unread, state_change and limit filters, as the
 * api applies them: unread ones only unless include_read=true) and PUT
 * /notifications, over a list the test owns.
 */
function notificationsApi(list: Notification[]) {
  const puts: unknown[] = [];
  const gets: string[] = [];
  fakeApi.handle = async (request) => {
    if (request.method === 'PUT') {
      const { ids } = (await request.json()) as { ids: string[] };
      puts.push(ids);
      for (const n of list) if (ids.includes(n.id)) n.read_at ??= '2026-11-01T11:00:00.000Z';
      return new Response(null, { status: 204 });
    }
    const u = new URL(request.url);
    // The inbox's open incidents (issue 26): none here.
    if (u.pathname === '/api/incidents') return Response.json({ incidents: [], cursor: '' });
    expect(u.pathname).toBe('/api/notifications');
    gets.push(u.search);
    expect(u.searchParams.has('kind')).toBe(false);
    const changes = u.searchParams.get('state_change');
    const unread = u.searchParams.get('include_read') !== 'true' && u.searchParams.get('unread') !== 'false';
    const limit = Number(u.searchParams.get('limit') ?? 50);
    const shown = list.filter((n) => (changes === null || (changeOf(n) !== undefined) === (changes === 'true')) && (!unread || !n.read_at));
    return Response.json({ notifications: shown.slice(0, limit), cursor: shown.length > limit ? 'more' : '' });
  };
  return { puts, gets };
}

describe('notifications', () => {
  it('counts unread notifications on the bell', async () => {
    notificationsApi([notification('a', { title: 'A' }), notification('b', { title: 'B' }), notification('c', { title: 'C' }, true)]);
    renderWithProviders(<NotificationsButton onOpen={() => {}} />);
    expect(await screen.findByRole('button', { name: 'Notifications, 2 unread' })).toBeTruthy();
    expect(screen.getByTestId('unread-count').textContent).toBe('2');
  });

  it('counts unread state changes apart, with the api\'s filter, alerts in red ahead of routine ones', async () => {
    const { gets } = notificationsApi([
      notification('a', { title: 'Job completed' }),
      notification('b', { title: 'Job failed', state_change: 'down' }, false, 'WEB_ERROR'),
      notification('c', { title: 'Workflow terminated automatically', state_change: 'terminated' }, false, 'WEB_ALERT'),
      // a failure of a workflow already down is routine
      notification('d', { title: 'Job failed' }, false, 'WEB_ERROR'),
      notification('e', { title: 'Job failed', state_change: 'down' }, true, 'WEB_ERROR'),
    ]);
    renderWithProviders(<NotificationsButton onOpen={() => {}} />);
    expect(await screen.findByRole('button', { name: 'Notifications, 2 alerts, 4 unread' })).toBeTruthy();
    expect(screen.getByTestId('unread-count').textContent).toBe('2');
    expect(screen.getByTestId('unread-count').className).not.toContain('routine');
    expect(gets).toContain('?unread=true&state_change=true&limit=100');
    expect(gets).toContain('?unread=true&state_change=false&limit=100');
  });

  it('counts every unread state change, however many routine ones are newer', async () => {
    const routine = Array.from({ length: 150 }, (_, i) => notification(`r${i}`, { title: 'Job failed' }, false, 'WEB_ERROR'));
    notificationsApi([...routine, notification('down', { title: 'Job failed', state_change: 'down' }, false, 'WEB_ERROR')]);
    renderWithProviders(<NotificationsButton onOpen={() => {}} />);
    expect(await screen.findByRole('button', { name: 'Notifications, 1 alert, 101+ unread' })).toBeTruthy();
    expect(screen.getByTestId('unread-count').textContent).toBe('1');
  });

  it('opens on the state changes, asking the api for them only, with everything else one click away', async () => {
    const { gets } = notificationsApi([
      notification('a', { title: 'Job completed' }),
      notification('b', { title: 'Workflow terminated automatically', state_change: 'terminated' }, false, 'WEB_ALERT'),
      notification('c', { title: 'Job failed' }, false, 'WEB_ERROR'),
    ]);
    const user = userEvent.setup();
    renderWithProviders(<NotificationsDrawer onClose={() => {}} />);
    const drawer = await screen.findByRole('dialog', { name: 'Notifications' });
    await within(drawer).findByText('Workflow terminated automatically');
    expect(within(drawer).queryByText('Job completed')).toBeNull();
    expect(within(drawer).queryByText('Job failed')).toBeNull();
    expect(within(drawer).getByRole('button', { name: 'State changes' }).getAttribute('aria-pressed')).toBe('true');
    expect(gets).toContain('?include_read=true&state_change=true');
    await user.click(within(drawer).getByRole('button', { name: 'Everything else' }));
    await within(drawer).findByText('Job completed');
    expect(within(drawer).getByText('Job failed')).toBeTruthy();
    expect(within(drawer).queryByText('Workflow terminated automatically')).toBeNull();
    expect(gets).toContain('?include_read=true&state_change=false');
  });

  it('counts unread recoveries in green when nothing is failing, and names them in the label', async () => {
    notificationsApi([
      notification('a', { title: 'Job completed' }),
      notification('b', { title: 'Workflow recovered', state_change: 'recovered' }),
      notification('c', { title: 'Workflow recovered', state_change: 'recovered' }, true),
    ]);
    renderWithProviders(<NotificationsButton onOpen={() => {}} />);
    expect(await screen.findByRole('button', { name: 'Notifications, 1 recovered, 2 unread' })).toBeTruthy();
    expect(screen.getByTestId('unread-count').textContent).toBe('1');
    expect(screen.getByTestId('unread-count').className).toContain('bell-count-recovered');
  });

  it('keeps the red alert count ahead of recoveries', async () => {
    notificationsApi([
      notification('a', { title: 'Job failed', state_change: 'down' }, false, 'WEB_ERROR'),
      notification('b', { title: 'Workflow recovered', state_change: 'recovered' }),
    ]);
    renderWithProviders(<NotificationsButton onOpen={() => {}} />);
    expect(await screen.findByRole('button', { name: 'Notifications, 1 alert, 1 recovered, 2 unread' })).toBeTruthy();
    expect(screen.getByTestId('unread-count').textContent).toBe('1');
    expect(screen.getByTestId('unread-count').className).toBe('bell-count');
  });

  it('tags each state change in words, a recovery "recovered" and the failure that turned it down "down"', async () => {
    notificationsApi([
      notification('a', { title: 'Job completed' }),
      notification('b', { title: 'Workflow recovered', message: 'Workflow "api" is up again.', state_change: 'recovered' }),
      notification('c', { title: 'Job failed', state_change: 'down' }, false, 'WEB_ERROR'),
      notification('d', { title: 'Build failed', state_change: 'build_failed' }, false, 'WEB_ERROR'),
    ]);
    const user = userEvent.setup();
    renderWithProviders(<NotificationsDrawer onClose={() => {}} />);
    const drawer = await screen.findByRole('dialog', { name: 'Notifications' });
    const recovered = (await within(drawer).findByText('Workflow recovered')).closest('li')!;
    expect(recovered.className).toContain('notification-recovered');
    expect(recovered.className).toContain('notification-success');
    expect(within(recovered).getByText('recovered')).toBeTruthy();
    const down = within(drawer).getByText('Job failed').closest('li')!;
    expect(down.className).toContain('notification-down');
    expect(within(down).getByText('down')).toBeTruthy();
    expect(within(within(drawer).getByText('Build failed').closest('li')!).getByText('build failed')).toBeTruthy();
    expect(within(drawer).queryByText('Job completed')).toBeNull();
    await user.click(within(drawer).getByRole('button', { name: 'Everything else' }));
    await within(drawer).findByText('Job completed');
    expect(within(drawer).queryByText('Workflow recovered')).toBeNull();
    // a routine notification carries no tag
    expect(within(drawer).getByText('Job completed').closest('li')!.querySelector('.notification-tag')).toBeNull();
  });

  it('lists notifications with their text and link, marks one or all read, and keeps the read ones listed as read', async () => {
    const list = [
      notification('0190a5b2-0000-7000-8000-000000000001', {
        title: 'Job completed',
        message: 'nightly finished in 20s.',
        action_url: '/workflows/w1/jobs/j1',
      }),
      notification('0190a5b2-0000-7000-8000-000000000002', { title: 'Build failed', action_url: 'https://evil.example/' }),
    ];
    const { puts } = notificationsApi(list);
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
    // The drawer is a history: it asks for read ones too, and they stay, marked read.
    await waitFor(() => expect(within(drawer).getAllByText('Read')).toHaveLength(2));
    expect(within(drawer).getByText('Job completed')).toBeTruthy();
  });

  it('closes on Escape and says when there is nothing', async () => {
    notificationsApi([]);
    const onClose = vi.fn();
    renderWithProviders(<NotificationsDrawer onClose={onClose} />);
    await screen.findByText('No state changes');
    await userEvent.keyboard('{Escape}');
    expect(onClose).toHaveBeenCalled();
  });

  it('gives focus back to the button that opened it when it closes', async () => {
    notificationsApi([]);
    function Opener() {
      const [open, setOpen] = useState(false);
      return (
        <>
          <button type="button" onClick={() => setOpen(true)}>
            Open the drawer
          </button>
          {open ? <NotificationsDrawer onClose={() => setOpen(false)} /> : null}
        </>
      );
    }
    renderWithProviders(<Opener />);
    const opener = screen.getByRole('button', { name: 'Open the drawer' });
    await userEvent.click(opener);
    await screen.findByText('No state changes');
    expect(document.activeElement).toBe(screen.getByRole('dialog'));
    await userEvent.keyboard('{Escape}');
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(document.activeElement).toBe(opener);
  });
});
