import { useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, Navigate, useLocation, useNavigate } from 'react-router';
import { api, call } from '../api/client';
import { FormErrors, TextField } from '../components/fields';
import { useFormErrors } from '../components/use-form-errors';
import { setSession, useSession } from '../session';
import { useTitle } from '../components/use-title';

export type AuthMode = 'login' | 'signup';
export interface Credentials {
  email: string;
  password: string;
}

/** The sign-in and sign-up form; `onSubmit` talks to the api and throws its errors. */
export function AuthForm({ mode, onSubmit }: { mode: AuthMode; onSubmit: (c: Credentials) => Promise<void> }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const errors = useFormErrors((f) => (f === 'email' || f === 'password' ? f : undefined));
  const signup = mode === 'signup';

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    errors.clear();
    setBusy(true);
    try {
      await onSubmit({ email, password });
    } catch (err) {
      errors.show(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="card auth" onSubmit={(e) => void submit(e)} noValidate>
      <h1>{signup ? 'Create your account' : 'Sign in to orloj'}</h1>
      <TextField id="email" label="Email" type="email" autoComplete="email" required value={email} onChange={setEmail} error={errors.fields.email} />
      <TextField
        id="password"
        label="Password"
        type="password"
        autoComplete={signup ? 'new-password' : 'current-password'}
        required
        value={password}
        onChange={setPassword}
        error={errors.fields.password}
        hint={signup ? '8 to 128 characters.' : undefined}
      />
      <FormErrors errors={errors.general} />
      <button type="submit" disabled={busy}>
        {busy ? 'Please wait…' : signup ? 'Sign up' : 'Log in'}
      </button>
      <p className="muted">
        {signup ? (
          <>
            Have an account? <Link to="/login">Log in</Link>
          </>
        ) : (
          <>
            New here? <Link to="/signup">Create an account</Link>
          </>
        )}
      </p>
    </form>
  );
}

export function AuthPage({ mode }: { mode: AuthMode }) {
  useTitle(mode === 'signup' ? 'Sign up' : 'Log in');
  const session = useSession();
  const client = useQueryClient();
  const navigate = useNavigate();
  const location = useLocation();
  const from = (location.state as { from?: string } | null)?.from ?? '/workflows';
  if (session.data) return <Navigate to={from} replace />;

  // An invitation link (`orloj invite`) carries the code; sign-up sends it along.
  const invitation = new URLSearchParams(location.search).get('invitation') ?? undefined;
  const submit = async (body: Credentials) => {
    const user = await call(mode === 'signup' ? api.POST('/auth/register', { body: { ...body, invitation } }) : api.POST('/auth/login', { body }));
    setSession(client, { email: user.email });
    navigate(from, { replace: true });
  };
  return (
    <main className="page narrow" id="main">
      <p className="brand brand-large">orloj</p>
      <AuthForm mode={mode} onSubmit={submit} />
    </main>
  );
}
