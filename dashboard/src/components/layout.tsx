import { useState } from 'react';
import { Link, NavLink, Outlet, useNavigate } from 'react-router';
import { useDisconnected } from '../connection';
import { messageOf } from '../api/problem';
import { useSession, useSignOut } from '../session';
import { NotificationsButton, NotificationsDrawer } from './notifications';
import { toasts } from './toasts';

/** The signed-in frame: top bar with navigation, notifications and sign-out; the page below. */
export function Layout() {
  const session = useSession();
  const signOut = useSignOut();
  const navigate = useNavigate();
  const [drawerOpen, setDrawerOpen] = useState(false);

  const logOut = async () => {
    try {
      await signOut();
      navigate('/login', { replace: true });
    } catch (err) {
      toasts.push('error', messageOf(err));
    }
  };

  return (
    <>
      <a href="#main" className="skip-link">
        Skip to content
      </a>
      <header className="topbar">
        <Link to="/workflows" className="brand">
          orloj
        </Link>
        <nav aria-label="Main">
          <NavLink to="/workflows">Workflows</NavLink>
          <NavLink to="/analytics">Analytics</NavLink>
          <NavLink to="/maintenance">Maintenance</NavLink>
          <NavLink to="/profile">Profile</NavLink>
        </nav>
        <div className="topbar-end">
          <NotificationsButton onOpen={() => setDrawerOpen(true)} />
          <span className="who" title={session.data?.email}>
            {session.data?.email}
          </span>
          <button type="button" className="secondary" onClick={() => void logOut()}>
            Log out
          </button>
        </div>
      </header>
      <DisconnectedBanner />
      <main id="main" className="page" tabIndex={-1}>
        <Outlet />
      </main>
      {drawerOpen ? <NotificationsDrawer onClose={() => setDrawerOpen(false)} /> : null}
    </>
  );
}

/** Lasting while the server does not answer; what is on screen stays as it was last shown. */
function DisconnectedBanner() {
  const disconnected = useDisconnected();
  return (
    <div role="status" aria-live="polite" className={disconnected ? 'disconnected' : 'visually-hidden'}>
      {disconnected ? 'Disconnected — retrying. What you see is as it was last loaded.' : ''}
    </div>
  );
}
