import { fireEvent, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import type { User } from '../api/client';
import { toasts } from '../components/toasts';
import { ProfilePage } from '../routes/profile';
import { fakeApi } from './fake-api';
import { renderWithProviders } from './render';

/** GET and PUT /users over one user; `putStatus` answers the PUT. */
function fakeUsersApi(putStatus: number) {
  const user: User = {
    email: 'me@example.com',
    notification_preference: 'ALL',
    created_at: '2026-11-01T10:00:00.000Z',
    updated_at: '2026-11-01T10:00:00.000Z',
  };
  fakeApi.handle = async (request) => {
    expect(new URL(request.url).pathname).toBe('/api/users');
    if (request.method === 'PUT') {
      if (putStatus !== 204) {
        return Response.json(
          { title: 'Unavailable', status: putStatus, code: 'service_unavailable' },
          { status: putStatus, headers: { 'Content-Type': 'application/problem+json' } },
        );
      }
      user.notification_preference = ((await request.json()) as Pick<User, 'notification_preference'>).notification_preference;
      return new Response(null, { status: 204 });
    }
    return Response.json(user);
  };
}

const radio = (name: string) => screen.getByLabelText<HTMLInputElement>(name, { exact: true });

describe('profile page', () => {
  it('checks the chosen preference as the click happens, and keeps it once saved', async () => {
    const saved = vi.spyOn(toasts, 'push');
    fakeUsersApi(204);
    renderWithProviders(<ProfilePage />);
    await screen.findByRole('heading', { name: 'Profile' });
    expect(radio('All notifications').checked).toBe(true);
    // Read right after the click, as a browser test does: the mutation's state comes a tick later.
    fireEvent.click(radio('None'));
    expect(radio('None').checked).toBe(true);
    await waitFor(() => expect(saved).toHaveBeenCalledWith('success', 'Notification preference saved.'));
    await waitFor(() => expect(radio('None').disabled).toBe(false));
    expect(radio('None').checked).toBe(true);
    expect(radio('All notifications').checked).toBe(false);
  });

  it('goes back to the saved preference when saving fails', async () => {
    fakeUsersApi(503);
    const user = userEvent.setup();
    renderWithProviders(<ProfilePage />);
    await screen.findByRole('heading', { name: 'Profile' });
    await user.click(radio('None'));
    await waitFor(() => expect(radio('All notifications').checked).toBe(true));
    expect(radio('None').checked).toBe(false);
  });
});
