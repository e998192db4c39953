// The console's one GraphQL client: queries and mutations over HTTP POST (JSON, the session
// cookie sent by the browser), subscriptions over graphql-transport-ws on the same path
// (authenticated by the same cookie, so connection_init carries no credential). Pages use
// urql's hooks (src/hooks/) with the typed documents of src/api/<resource>.ts.
import { Client, cacheExchange, fetchExchange, mapExchange, subscriptionExchange } from '@urql/core';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import { sessionLost } from '../lib/errors';
import { fetchWithDeadline } from '../lib/deadline';

export interface ConsoleClient {
  client: Client;
  ws: WsClient;
  socket: SocketState;
  dispose(): void;
}

// SocketState says whether the subscriptions' socket is connected, for pages that show
// when their live data may be behind (read with useSyncExternalStore).
export interface SocketState {
  connected(): boolean;
  subscribe(listener: () => void): () => void;
}

function socketState(): SocketState & { set(up: boolean): void } {
  let up = false;
  const listeners = new Set<() => void>();
  return {
    connected: () => up,
    subscribe(l) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    set(v) {
      if (v === up) return;
      up = v;
      listeners.forEach((l) => l());
    },
  };
}

// Close codes the server uses for a socket it will not serve (no or lost session).
const refusedCodes = new Set([4401, 4403]);

function closeReasonOf(e: unknown): string | undefined {
  const r = typeof e === 'object' && e !== null && 'reason' in e ? String((e as { reason: unknown }).reason) : '';
  return r && r !== 'Forbidden' ? r : undefined;
}

function closeCode(e: unknown): number | undefined {
  return typeof e === 'object' && e !== null && 'code' in e ? Number((e as { code: unknown }).code) : undefined;
}

// onSessionLost hears the server's reason when a socket was closed for it. requestTimeoutMs
// is the server's request timeout: reads wait past it for the server's answer (lib/deadline).
export function createConsoleClient(endpoint: string, requestTimeoutMs: number, onSessionLost: (reason?: string) => void): ConsoleClient {
  const socket = socketState();
  const wsUrl = new URL(endpoint, window.location.href);
  wsUrl.protocol = wsUrl.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = createWsClient({
    url: wsUrl.toString(),
    lazy: true,
    lazyCloseTimeout: 3000,
    retryAttempts: 1_000_000,
    // At most ten seconds between tries, with jitter, while the server is away.
    retryWait: (retries) => new Promise((r) => setTimeout(r, Math.min(10_000, 500 * 2 ** retries) + Math.random() * 500)),
    shouldRetry: (e) => !refusedCodes.has(closeCode(e) ?? 0),
    on: {
      connected: () => socket.set(true),
      closed: (e) => {
        socket.set(false);
        if (refusedCodes.has(closeCode(e) ?? 0)) onSessionLost(closeReasonOf(e));
      },
    },
  });
  const client = new Client({
    url: endpoint,
    requestPolicy: 'cache-and-network',
    fetchOptions: { credentials: 'same-origin', headers: { 'Content-Type': 'application/json' } },
    preferGetMethod: false,
    fetch: fetchWithDeadline(requestTimeoutMs),
    exchanges: [
      mapExchange({
        onError(error) {
          if (sessionLost(error)) onSessionLost();
        },
      }),
      cacheExchange,
      fetchExchange,
      subscriptionExchange({
        forwardSubscription(request) {
          const input = { ...request, query: request.query || '' };
          return {
            subscribe(sink) {
              const unsubscribe = ws.subscribe(input, sink);
              return { unsubscribe };
            },
          };
        },
      }),
    ],
  });
  return { client, ws, socket, dispose: () => void ws.dispose() };
}
