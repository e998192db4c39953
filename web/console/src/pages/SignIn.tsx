// Sign-in: the administrator pastes a bearer token once. The server answers with an
// HttpOnly session cookie; the token leaves the page's memory as soon as it is sent.
import { useState, type FormEvent } from 'react';
import { signIn, startSSO, SessionError, type SessionInfo } from '../api/session';
import { Banner, Field } from '../components/ui';

export function SignIn({ url, sso, reason, onSignedIn }: { url: string; sso?: string; reason?: string; onSignedIn(s: SessionInfo): void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<{ message: string; field: boolean } | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const t = token;
    setToken('');
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await signIn(url, t));
    } catch (err) {
      const se = err instanceof SessionError ? err : null;
      // A token that is not valid (401 UNAUTHENTICATED) or not one at all (400) is the field's error.
      setError({ message: se?.message ?? 'Sign-in failed.', field: se?.code === 'INVALID_INPUT' || se?.code === 'UNAUTHENTICATED' });
    } finally {
      setBusy(false);
    }
  };

  const [ssoError, setSSOError] = useState<string | null>(null);
  const signInSSO = async () => {
    setBusy(true);
    setSSOError(null);
    try {
      window.location.assign(await startSSO(sso!));
    } catch (err) {
      setSSOError(err instanceof SessionError ? err.message : 'Single sign-on could not start.');
      setBusy(false);
    }
  };

  return (
    <main id="main" className="signin">
      <h1>Fabric Console</h1>
      <p className="lede">Apelora fabric: from a known server to an admitted Incus cluster member, every step approved and audited.</p>
      {reason ? <Banner tone="caution" title="Sign in again">{reason}</Banner> : null}
      {sso ? (
        <section className="card" aria-labelledby="sso-title">
          <h2 id="sso-title">Single sign-on</h2>
          <p>Sign in with your company account; your groups there decide what you may do here.</p>
          {ssoError ? <p className="problems" role="alert">{ssoError}</p> : null}
          <button type="button" className="btn btn-primary" onClick={signInSSO} disabled={busy}>
            Sign in with SSO
          </button>
        </section>
      ) : null}
      <form onSubmit={submit} className="card" noValidate>
        <h2>Sign in</h2>
        <Field
          label="Bearer token"
          error={error?.field ? error.message : undefined}
          hint={<>Paste the token of your identity (apl_…), as printed by <code>apelora identity create</code>. It is exchanged for a session and not kept in the browser.</>}
        >
          {(a) => (
            <input
              {...a}
              className="input"
              type="password"
              autoComplete="off"
              spellCheck={false}
              value={token}
              onChange={(e) => setToken(e.target.value)}
              name="token"
              required
            />
          )}
        </Field>
        {error && !error.field ? <p className="problems" role="alert">{error.message}</p> : null}
        <button type="submit" className="btn btn-primary" disabled={busy || token.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
