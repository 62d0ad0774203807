import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Notification } from '../api/contract';
import { NotificationsButton, NotificationsDrawer } from '../components/notifications';
import { renderWithProviders } from './render';

function notification(id: string, payload: object, read = false): Notification {
  return {
    id,
    kind: 'WEB_SUCCESS',
    payload: JSON.stringify(payload),
    ...(read ? { read_at: '2026-11-01T10:05:00.000Z' } : {}),
    created_at: '2026-11-01T10:00:00.000Z',
    updated_at: '2026-11-01T10:00:00.000Z',
  };
}

/** The contract's GET and PUT /notifications, over a list the test owns. */
function fakeApi(list: Notification[]) {
  const puts: unknown[] = [];
  const fetch = vi.fn(async (url: string, init?: RequestInit) => {
    if (init?.method === 'PUT') {
      const { ids } = JSON.parse(String(init.body)) as { ids: string[] };
      puts.push(ids);
      for (const n of list) if (ids.includes(n.id)) n.read_at ??= '2026-11-01T11:00:00.000Z';
      return new Response(null, { status: 204 });
    }
    expect(url).toBe('/api/notifications');
    return Response.json({ notifications: list, cursor: '' });
  });
  vi.stubGlobal('fetch', fetch);
  return { fetch, puts };
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
    await screen.findByText('No notifications yet');
    await userEvent.keyboard('{Escape}');
    expect(onClose).toHaveBeenCalled();
  });
});
