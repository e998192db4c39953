// The console's sign-in: the bearer token is sent once, in a JSON body, and exchanged for
// an HttpOnly session cookie the page's script never sees. Nothing is kept in storage.
export interface SessionInfo {
  identity: string;
  expiresAt: string;
}

export class SessionError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly status: number,
  ) {
    super(message);
  }
}

async function call(url: string, init: RequestInit): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, { credentials: 'same-origin', cache: 'no-store', ...init });
  } catch {
    throw new SessionError('The server could not be reached: check that apelora serve is running, then try again.', 'UNAVAILABLE', 0);
  }
  if (!res.ok && res.status !== 204) {
    let code = 'INTERNAL';
    let message = `The server answered ${res.status}.`;
    try {
      const body = await res.json();
      code = body?.error?.code ?? code;
      message = body?.error?.message ?? message;
    } catch {
      // not JSON: keep the status line
    }
    throw new SessionError(message, code, res.status);
  }
  return res;
}

export async function signIn(url: string, token: string): Promise<SessionInfo> {
  const res = await call(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  return res.json();
}

// currentSession says who is signed in, or throws a SessionError saying why nobody is. The
// server answers "nobody" (no cookie) with 200 and signedIn false, so a first visit logs no
// failed request in the browser's console.
export async function currentSession(url: string): Promise<SessionInfo> {
  const res = await call(url, { method: 'GET' });
  const body = await res.json();
  if (!body?.signedIn) {
    throw new SessionError(body?.message ?? 'not signed in', 'UNAUTHENTICATED', 401);
  }
  return { identity: body.identity, expiresAt: body.expiresAt };
}

export async function signOut(url: string): Promise<void> {
  await call(url, { method: 'DELETE' });
}

// startSSO asks the server where to sign in at the company's identity provider; the page
// then goes there, and the provider sends the browser back to the server, which sets the
// session cookie. The provider's tokens never reach the page.
export async function startSSO(url: string): Promise<string> {
  const res = await call(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: '{}',
  });
  const body = await res.json();
  return body.url;
}
