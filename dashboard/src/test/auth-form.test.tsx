import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { MemoryRouter } from 'react-router';
import { describe, expect, it, vi } from 'vitest';
import { ApiError } from '../api/problem';
import { AuthForm, AuthPage, type Credentials } from '../routes/auth';
import { fakeApi } from './fake-api';

function setup(mode: 'login' | 'signup', onSubmit: (c: Credentials) => Promise<void>) {
  render(
    <MemoryRouter>
      <AuthForm mode={mode} onSubmit={onSubmit} />
    </MemoryRouter>,
  );
  return userEvent.setup();
}

describe('AuthForm', () => {
  it('signs up with the typed email and password', async () => {
    const onSubmit = vi.fn(async () => {});
    const user = setup('signup', onSubmit);
    await user.type(screen.getByLabelText('Email'), 'me@example.com');
    await user.type(screen.getByLabelText('Password'), 'correct horse{Enter}');
    expect(onSubmit).toHaveBeenCalledWith({ email: 'me@example.com', password: 'correct horse' });
  });

  it("shows a taken email at the email field and a failed login above the button, in the api's words", async () => {
    const taken = new ApiError({ status: 409, code: 'email_taken', detail: 'An account with this email already exists.', errors: [{ field: 'email', message: 'is already registered' }] });
    const user = setup('signup', vi.fn().mockRejectedValue(taken));
    await user.type(screen.getByLabelText('Email'), 'me@example.com');
    await user.type(screen.getByLabelText('Password'), 'correct horse{Enter}');
    expect(await screen.findByText('is already registered')).toBeTruthy();
    expect(screen.getByLabelText('Email').getAttribute('aria-invalid')).toBe('true');
  });

  it('says when the credentials are wrong', async () => {
    const wrong = new ApiError({ status: 401, code: 'invalid_credentials', detail: 'The email or password is incorrect.' });
    const user = setup('login', vi.fn().mockRejectedValue(wrong));
    await user.type(screen.getByLabelText('Email'), 'me@example.com');
    await user.type(screen.getByLabelText('Password'), 'nope nope{Enter}');
    expect((await screen.findByRole('alert')).textContent).toBe('The email or password is incorrect.');
  });
});

describe('sign-up page', () => {
  it('sends the invitation of an invitation link (orloj invite) with the credentials', async () => {
    const registered: unknown[] = [];
    fakeApi.handle = async (request) => {
      const path = new URL(request.url).pathname;
      if (path === '/api/auth/validate') return Response.json({ title: 'Unauthorized', status: 401, code: 'unauthenticated' }, { status: 401, headers: { 'Content-Type': 'application/problem+json' } });
      expect(path).toBe('/api/auth/register');
      registered.push(await request.json());
      return Response.json({ email: 'me@example.com', notification_preference: 'ALL', created_at: '2026-11-01T10:00:00.000Z', updated_at: '2026-11-01T10:00:00.000Z' }, { status: 201 });
    };
    render(
      <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
        <MemoryRouter initialEntries={['/signup?invitation=1797000000.abc']}>
          <AuthPage mode="signup" />
        </MemoryRouter>
      </QueryClientProvider>,
    );
    const user = userEvent.setup();
    await user.type(await screen.findByLabelText('Email'), 'me@example.com');
    await user.type(screen.getByLabelText('Password'), 'correct horse{Enter}');
    await waitFor(() => expect(registered).toEqual([{ email: 'me@example.com', password: 'correct horse', invitation: '1797000000.abc' }]));
  });
});
