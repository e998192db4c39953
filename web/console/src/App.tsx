import { useCallback, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { Provider } from 'urql';
import type { ConsoleConfig } from './config';
import { createConsoleClient } from './api/client';
import { SocketContext } from './hooks/live';
import { currentSession, signOut, SessionError, type SessionInfo } from './api/session';
import { useAuditTrailState } from './hooks/audit';
import { useViewerQuery } from './hooks/identities';
import { Link, Router, useRouter } from './router';
import { ViewerContext } from './viewer';
import { SignIn } from './pages/SignIn';
import { FleetPage } from './pages/Fleet';
import { MachinePage } from './pages/Machine';
import { EnrolmentPage } from './pages/Enrolment';
import { FencingPage } from './pages/Fencing';
import { RollingPage } from './pages/Rolling';
import { AuditPage } from './pages/Audit';
import { IdentitiesPage } from './pages/Identities';
import { HardwarePage } from './pages/Hardware';
import { ClustersPage } from './pages/Clusters';
import { Banner, Loading, Problems, RequestTimeoutContext, Time } from './components/ui';
import { canManage } from './lib/actions';
import { problemsOf } from './lib/errors';
import { permissionLabel, sortPermissions } from './lib/identities';
import { themeChoices, useTheme, type ThemeChoice } from './lib/theme';
import { ToastHost } from './components/Toasts';

type Auth = { state: 'checking' } | { state: 'out'; reason?: string } | { state: 'in'; session: SessionInfo };

// reasonOf keeps what the server said about a lost session, but not "you never signed in".
function reasonOf(e: unknown): string | undefined {
  if (e instanceof SessionError) return /^not signed in/i.test(e.message) ? undefined : e.message;
  return undefined;
}

export function App({ config }: { config: ConsoleConfig }) {
  const [auth, setAuth] = useState<Auth>({ state: 'checking' });

  useEffect(() => {
    currentSession(config.session).then(
      (session) => setAuth({ state: 'in', session }),
      (e) => setAuth({ state: 'out', reason: reasonOf(e) }),
    );
  }, [config.session]);

  // A lost session (expired, signed out elsewhere, identity removed) returns to sign-in
  // with the server's reason.
  // The server's reason for closing a socket says why when the session is already gone from
  // this browser (signed out in another tab).
  // Requests in flight together fail together: they share one session check, as a second
  // check, sent after the first answer cleared the cookie, would only hear "not signed in".
  // Nor does a vaguer reason replace one the server already gave.
  const checking = useRef<Promise<SessionInfo> | null>(null);
  const lost = useCallback((closeReason?: string) => {
    if (!checking.current) {
      const check = currentSession(config.session);
      checking.current = check;
      check.catch(() => undefined).finally(() => {
        if (checking.current === check) checking.current = null;
      });
    }
    checking.current.then(
      (session) => setAuth((a) => (a.state === 'in' && a.session.expiresAt === session.expiresAt ? a : { state: 'in', session })),
      (e) => {
        const said = reasonOf(e) ?? sentence(closeReason);
        setAuth((a) => (a.state === 'out' && a.reason && !said ? a : { state: 'out', reason: said ?? 'Your session has ended: sign in again.' }));
      },
    );
  }, [config.session]);

  if (auth.state === 'checking') return <Loading what="the console" />;
  if (auth.state === 'out') {
    return <SignIn url={config.session} sso={config.sso} reason={auth.reason} onSignedIn={(session) => setAuth({ state: 'in', session })} />;
  }
  return (
    <SignedIn
      key={auth.session.identity + auth.session.expiresAt}
      config={config}
      session={auth.session}
      onLost={lost}
      onSignedOut={() => setAuth({ state: 'out', reason: 'You signed out.' })}
    />
  );
}

// sentence capitalises a server message for a banner.
function sentence(s: string | undefined): string | undefined {
  return s ? s.charAt(0).toUpperCase() + s.slice(1) + (/[.!?]$/.test(s) ? '' : '.') : undefined;
}

function SignedIn({ config, session, onLost, onSignedOut }: { config: ConsoleConfig; session: SessionInfo; onLost(reason?: string): void; onSignedOut(): void }) {
  const lostRef = useRef(onLost);
  const signingOut = useRef(false);
  lostRef.current = signingOut.current ? () => {} : onLost;
  const cc = useMemo(() => createConsoleClient(config.endpoint, config.requestTimeoutMs, (reason) => lostRef.current(reason)), [config.endpoint, config.requestTimeoutMs]);
  useEffect(() => () => cc.dispose(), [cc]);

  // Ask again when the session's time is up, so the console says so without waiting for
  // the next request.
  useEffect(() => {
    const ms = new Date(session.expiresAt).getTime() - Date.now();
    const t = setTimeout(() => lostRef.current(), Math.max(0, Math.min(ms + 1000, 2 ** 31 - 1)));
    return () => clearTimeout(t);
  }, [session.expiresAt]);

  const out = async () => {
    // Signing out ends this session's sockets on the server too: that is no lost session.
    signingOut.current = true;
    lostRef.current = () => {};
    try {
      await signOut(config.session);
    } finally {
      cc.dispose();
      onSignedOut();
    }
  };

  return (
    <Provider value={cc.client}>
      <SocketContext.Provider value={cc.socket}>
        <RequestTimeoutContext.Provider value={config.requestTimeoutMs}>
          <Router>
            <Shell session={session} onSignOut={out}>
              <Pages />
            </Shell>
          </Router>
        </RequestTimeoutContext.Provider>
      </SocketContext.Provider>
    </Provider>
  );
}

function Shell({ session, onSignOut, children }: { session: SessionInfo; onSignOut(): void; children: ReactNode }) {
  const viewer = useViewerQuery();
  const v = viewer.data?.viewer ?? null;
  const perms = v ? sortPermissions(v.permissions).map(permissionLabel).join(', ') : '';
  useSlashToSearch();
  return (
    <ViewerContext.Provider value={v}>
      <ToastHost>
        <a className="skip-link" href="#main">
          Skip to content
        </a>
        <header className="topbar">
          <span className="brand">Fabric Console</span>
          <nav aria-label="Main">
            <ul>
              <li><Link to="/">Fleet</Link></li>
              <li><Link to="/enrolment">Enrolment</Link></li>
              <li><Link to="/fencing">Fencing</Link></li>
              <li><Link to="/rolling">Rolling reboots</Link></li>
              <li><Link to="/clusters">Clusters</Link></li>
              <li><Link to="/hardware">Hardware</Link></li>
              <li><Link to="/identities">Identities</Link></li>
              <li><Link to="/audit">Audit</Link></li>
              <li><a href="/graphiql/">GraphiQL</a></li>
            </ul>
          </nav>
          <div className="whoami">
            <ThemeSwitch />
            <span data-identity>
              {session.identity}
              {perms ? <span className="perms"> ({perms})</span> : null}
            </span>
            <button type="button" className="btn btn-plain btn-small" onClick={onSignOut}>
              Sign out
            </button>
          </div>
        </header>
        <main id="main" tabIndex={-1}>
          <Problems problems={problemsOf(viewer.error)} />
          <TrailBanner />
          {v && !canManage(v) ? (
            <Banner tone="info" title="View only">
              Identity “{v.name}” holds view-infrastructure: you see everything, and every change is disabled with the reason. Changes need
              manage-infrastructure.
            </Banner>
          ) : null}
          {children}
        </main>
      </ToastHost>
    </ViewerContext.Provider>
  );
}

// TrailBanner says on every page when the server's latest check of the audit trail found a
// problem (auditTrail), from when, and what to run.
function TrailBanner() {
  const trail = useAuditTrailState();
  if (!trail || trail.verifies) return null;
  return (
    <div className="banner tone-negative" role="alert" data-audit-trail="does-not-verify">
      <span className="banner-symbol" aria-hidden="true">✕</span>
      <div>
        <strong>
          The audit trail does not verify since <Time at={trail.since} />
        </strong>
        <div className="banner-body">
          {sentence(trail.problem ?? undefined)} Run <code>apelora audit verify</code> on a server to see what was changed.
        </div>
      </div>
    </div>
  );
}

const themeLabels: Record<ThemeChoice, string> = { system: 'As the system', light: 'Light', dark: 'Dark' };

function ThemeSwitch() {
  const [theme, setTheme] = useTheme();
  return (
    <label className="theme-switch">
      Theme
      <select className="input input-small" value={theme} onChange={(e) => setTheme(e.target.value as ThemeChoice)} data-theme-switch>
        {themeChoices.map((c) => (
          <option key={c} value={c}>{themeLabels[c]}</option>
        ))}
      </select>
    </label>
  );
}

// useSlashToSearch: "/" focuses the page's search (its role="search" form), as in MAAS's
// and LXD's consoles, unless the administrator is typing in a field or a dialog is open.
function useSlashToSearch() {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== '/' || e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) return;
      const at = e.target as HTMLElement | null;
      if (at?.closest('input, textarea, select, [contenteditable="true"]') || document.querySelector('dialog[open]')) return;
      const search = document.querySelector<HTMLInputElement>('main form[role="search"] input');
      if (!search) return;
      e.preventDefault();
      search.focus();
      search.select();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);
}

function Pages() {
  const { path } = useRouter();
  useEffect(() => {
    document.getElementById('main')?.focus({ preventScroll: true });
  }, [path]);
  if (path === '/') return <FleetPage />;
  if (path.startsWith('/machines/')) return <MachinePage name={decodeURIComponent(path.slice('/machines/'.length))} />;
  if (path === '/enrolment') return <EnrolmentPage />;
  if (path === '/fencing') return <FencingPage />;
  if (path === '/rolling') return <RollingPage />;
  if (path === '/audit') return <AuditPage />;
  if (path === '/identities') return <IdentitiesPage />;
  if (path === '/hardware') return <HardwarePage />;
  if (path === '/clusters') return <ClustersPage />;
  return (
    <section>
      <h1>Page not found</h1>
      <p>
        Nothing is at {path}. <Link to="/">Back to the fleet</Link>.
      </p>
    </section>
  );
}
