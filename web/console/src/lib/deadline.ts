// How long the console waits for the server. The server bounds every wait on Incus or
// MAAS by its request timeout (APELORA_REQUEST_TIMEOUT, told to the page as
// data-request-timeout) and then answers: UNAVAILABLE, or a read's partial answer with a
// warning (a machine page without MAAS's facts). So the console waits for a read longer
// than that, and never gives up on it to ask again, which would only start the wait over.
// A change (a mutation) has no deadline here: it may wait its turn for a step slot, and
// abandoning it would not stop it.

// readDeadlineMs is how long a read may take before the console gives up on it: two
// upstream waits (a read may make two in turn) and five seconds for the network.
export function readDeadlineMs(requestTimeoutMs: number): number {
  return 2 * requestTimeoutMs + 5000;
}

// isRead reports whether a GraphQL request body (JSON) is a query, not a mutation.
export function isRead(body: unknown): boolean {
  if (typeof body !== 'string') return false;
  try {
    const q = JSON.parse(body)?.query;
    return typeof q === 'string' && !/^\s*mutation\b/.test(stripComments(q));
  } catch {
    return false;
  }
}

function stripComments(q: string): string {
  return q.replace(/^(\s*#[^\n]*\n)+/, '');
}

// seconds says a duration in whole seconds, for sentences.
export function seconds(ms: number): string {
  const s = Math.round(ms / 1000);
  return `${s} s`;
}

// DeadlineError is a read the server did not answer in time.
export class DeadlineError extends Error {
  constructor(readonly afterMs: number, readonly requestTimeoutMs: number) {
    super(
      `The server did not answer within ${seconds(afterMs)} (its own request timeout is ${seconds(requestTimeoutMs)}): ` +
        'the connection to it or the server itself may be down. The page asks again shortly; reload it if this stays.',
    );
    this.name = 'DeadlineError';
  }
}

// fetchWithDeadline is fetch with a deadline on reads: past it the request is aborted with
// a DeadlineError. An abort by the caller (urql ending the query) still aborts it.
export function fetchWithDeadline(requestTimeoutMs: number, base: typeof fetch = fetch): typeof fetch {
  return (input, init) => {
    if (!isRead(init?.body)) return base(input, init);
    const after = readDeadlineMs(requestTimeoutMs);
    const ctl = new AbortController();
    const outer = init?.signal;
    const onAbort = () => ctl.abort(outer?.reason);
    if (outer) {
      if (outer.aborted) ctl.abort(outer.reason);
      else outer.addEventListener('abort', onAbort, { once: true });
    }
    const timer = setTimeout(() => ctl.abort(new DeadlineError(after, requestTimeoutMs)), after);
    return base(input, { ...init, signal: ctl.signal }).finally(() => {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
    });
  };
}
