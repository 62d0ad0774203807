import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { MemoryRouter } from 'react-router';
import { describe, expect, it, vi } from 'vitest';
import { ApiError } from '../api/problem';
import { AuthForm, type Credentials } from '../routes/auth';

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
