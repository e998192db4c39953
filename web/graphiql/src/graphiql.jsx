// Entry of the GraphiQL bundle embedded in apelora (see ../build.sh).
//
// Everything the page needs is in this bundle and its stylesheet: nothing is
// loaded from another origin, so the page works air-gapped under a
// "self only" Content-Security-Policy. The Go handler passes its settings as
// data attributes on #graphiql; there is no inline script.
import { GraphiQL } from 'graphiql';
import { getOperationAST, parse } from 'graphql';
import { createClient } from 'graphql-ws';
import { createRoot } from 'react-dom/client';
import 'graphiql/style.css';
import './page.css';

const HEADERS_PLACEHOLDER = '{\n  "Authorization": "Bearer "\n}';

// Lines stay short enough to read without scrolling in a half-width editor.
const DEFAULT_QUERY = `# Apelora fabric: GraphiQL
#
# To authenticate, open "Headers" below and put
# your token after "Bearer":
#
#   {"Authorization": "Bearer <token>"}
#
# Queries and mutations send these headers over
# HTTP; subscriptions send them in the websocket
# connection_init payload. After changing the
# token, re-fetch the schema (circular arrow on
# the left, or Shift-Ctrl-R) for completion and
# docs.
#
# Headers are never saved in the browser: paste
# the token again after reloading the page.

query {
  __typename
}
`;

// A lone "Bearer " is the untouched placeholder: send no Authorization at
// all rather than an empty credential.
function effectiveHeaders(headers) {
  const out = {};
  for (const [name, value] of Object.entries(headers || {})) {
    if (name.toLowerCase() === 'authorization' && /^\s*bearer\s*$/i.test(String(value))) {
      continue;
    }
    out[name] = value;
  }
  return out;
}

// Decide by the query text being sent: GraphiQL's documentAST can lag
// behind the editor by a moment.
function isSubscription(params) {
  try {
    const op = getOperationAST(parse(params.query), params.operationName || undefined);
    return op != null && op.operation === 'subscription';
  } catch {
    return false;
  }
}

// Failures come back as GraphQL errors, which GraphiQL shows as they are
// (an Error would be shown with its stack trace).
function failure(message) {
  return { errors: [{ message }] };
}

async function fetchHTTP(url, params, headers) {
  let res;
  try {
    res = await fetch(url, {
      method: 'POST',
      credentials: 'same-origin',
      headers: {
        Accept: 'application/graphql-response+json, application/json',
        ...headers,
        'Content-Type': 'application/json',
      },
      body: JSON.stringify(params),
    });
  } catch (e) {
    return failure(`Cannot reach ${url}: ${e.message}`);
  }
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    return failure(`HTTP ${res.status} ${res.statusText}: ${text.slice(0, 1000)}`);
  }
}

// Close codes after which retrying cannot help: the server refused the
// credentials (4401 Unauthorized, 4403 Forbidden). graphql-ws retries 4403 by
// default; it must not, or a wrong token hammers the server.
const REFUSED = new Set([4401, 4403]);

function closeError(e) {
  if (Array.isArray(e)) {
    return e; // GraphQL errors from the server
  }
  if (e && typeof e === 'object' && 'code' in e) {
    let msg = `Subscription socket closed: ${e.code}${e.reason ? ' ' + e.reason : ''}`;
    if (REFUSED.has(e.code)) {
      msg += '. The server refused the connection: check the Authorization header in the Headers tab.';
    }
    return { message: msg };
  }
  if (e instanceof Error) {
    return { message: e.message };
  }
  return { message: 'Subscription socket failed: is the server reachable?' };
}

// One lazy graphql-ws client per distinct set of headers: changing the token
// opens a new connection with the new connection_init payload. Lazy clients
// hold no socket while they have no subscription, so old ones cost nothing.
const wsClients = new Map();
const MAX_WS_CLIENTS = 4;

function wsClient(url, headers) {
  const key = JSON.stringify(headers);
  let client = wsClients.get(key);
  if (client) {
    return client;
  }
  client = createClient({
    url,
    connectionParams: headers,
    lazy: true,
    retryAttempts: 3,
    shouldRetry: (e) => e != null && typeof e === 'object' && 'code' in e && !REFUSED.has(e.code),
  });
  wsClients.set(key, client);
  if (wsClients.size > MAX_WS_CLIENTS) {
    const [oldest, old] = wsClients.entries().next().value;
    wsClients.delete(oldest);
    old.dispose();
  }
  return client;
}

function createFetcher(httpURL, wsURL) {
  return (params, opts) => {
    const headers = effectiveHeaders(opts && opts.headers);
    if (!isSubscription(params)) {
      return fetchHTTP(httpURL, params, headers);
    }
    const client = wsClient(wsURL, headers);
    return {
      subscribe(observer) {
        const dispose = client.subscribe(params, {
          next: (v) => observer.next(v),
          error: (e) => observer.error(closeError(e)),
          complete: () => observer.complete(),
        });
        return { unsubscribe: dispose };
      },
    };
  };
}

// GraphiQL keeps headers in its history (even with shouldPersistHeaders
// off) and in its tab state in localStorage. Headers carry bearer tokens, so
// this storage never writes them: they are replaced by the placeholder, which
// is also what a restored tab or history entry shows.
function scrubHeaders(value) {
  try {
    return JSON.stringify(JSON.parse(value), (k, v) =>
      k === 'headers' && (v === null || typeof v === 'string') ? HEADERS_PLACEHOLDER : v,
    );
  } catch {
    return value;
  }
}

function tokenFreeStorage() {
  let ls;
  try {
    ls = window.localStorage;
    ls.length; // throws where storage is disabled
  } catch {
    return null;
  }
  const ns = 'graphiql:';
  return {
    getItem: (key) => {
      const value = ls.getItem(key);
      return key === ns + 'tabState' && value ? scrubHeaders(value) : value;
    },
    setItem: (key, value) => {
      if (key === ns + 'headers') {
        ls.removeItem(key);
        return;
      }
      ls.setItem(key, scrubHeaders(value));
    },
    removeItem: (key) => ls.removeItem(key),
    get length() {
      let n = 0;
      for (let i = 0; i < ls.length; i++) {
        if ((ls.key(i) || '').startsWith(ns)) n++;
      }
      return n;
    },
    clear: () => {
      const keys = [];
      for (let i = 0; i < ls.length; i++) {
        const k = ls.key(i) || '';
        if (k.startsWith(ns)) keys.push(k);
      }
      keys.forEach((k) => ls.removeItem(k));
    },
  };
}

function main() {
  const root = document.getElementById('graphiql');
  const cfg = root.dataset;
  const httpURL = new URL(cfg.endpoint || '/graphql', window.location.href);
  const wsURL = new URL(cfg.subscriptionEndpoint || cfg.endpoint || '/graphql', window.location.href);
  wsURL.protocol = wsURL.protocol === 'https:' ? 'wss:' : 'ws:';
  const title = cfg.title || 'GraphiQL';
  const storage = tokenFreeStorage();

  createRoot(root).render(
    <GraphiQL
      fetcher={createFetcher(httpURL.href, wsURL.href)}
      defaultQuery={DEFAULT_QUERY}
      defaultHeaders={HEADERS_PLACEHOLDER}
      defaultEditorToolsVisibility="headers"
      shouldPersistHeaders={false}
      showPersistHeadersSettings={false}
      storage={storage}
    >
      <GraphiQL.Logo>{title}</GraphiQL.Logo>
    </GraphiQL>,
  );
}

main();
