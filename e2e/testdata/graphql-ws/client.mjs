// The reference graphql-ws client, set up as GraphiQL sets it up (web/graphiql/src/graphiql.jsx),
// for e2e/graphqlws_node_test.go. It runs the operations given as JSON on its command line
// one after another on one client and prints what happens as JSON lines on standard output:
//
//   node dist/client.cjs '{"url": "ws://…/graphql", "token": "apl_…", "origin": "http://…",
//                          "operations": [{"query": "…", "variables": {…}, "take": 1}]}'
//
//   {"connected": true}                      connection_ack received
//   {"op": 0, "next": {…}}                   a result of operation 0
//   {"op": 0, "complete": true}              operation 0 ended (after `take` results, it
//                                            is completed by the client)
//   {"op": 0, "error": …}                    operation 0 failed (GraphQL errors or a close)
//   {"closed": 4403, "reason": "…"}          the socket closed
//   {"done": true}                           every operation has ended
//
// An operation without `take` runs until the server completes it.
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const cfg = JSON.parse(process.argv[2]);
const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');

// What a browser page does: it sends its own origin.
class PageWebSocket extends WebSocket {
  constructor(url, protocols) {
    super(url, protocols, cfg.origin ? { origin: cfg.origin } : {});
  }
}

// As in GraphiQL: a refused token is final, anything else is retried a few times.
const REFUSED = new Set([4401, 4403]);
const client = createClient({
  url: cfg.url,
  webSocketImpl: PageWebSocket,
  connectionParams: cfg.token ? { Authorization: 'Bearer ' + cfg.token } : {},
  lazy: true,
  retryAttempts: cfg.retryAttempts ?? 3,
  retryWait: async () => new Promise((r) => setTimeout(r, 100)),
  shouldRetry: (e) => e != null && typeof e === 'object' && 'code' in e && !REFUSED.has(e.code),
  on: {
    connected: () => out({ connected: true }),
    closed: (e) => out({ closed: e && e.code, reason: e && e.reason }),
  },
});

function run(op, i) {
  return new Promise((resolve) => {
    let taken = 0;
    let dispose = () => {};
    dispose = client.subscribe(
      { query: op.query, variables: op.variables },
      {
        next: (v) => {
          out({ op: i, next: v });
          taken++;
          if (op.take && taken >= op.take) {
            dispose();
            out({ op: i, complete: true });
            resolve();
          }
        },
        error: (e) => {
          out({ op: i, error: Array.isArray(e) ? e : { code: e && e.code, reason: e && e.reason, message: String(e && e.message) } });
          resolve();
        },
        complete: () => {
          out({ op: i, complete: true });
          resolve();
        },
      },
    );
  });
}

for (const [i, op] of cfg.operations.entries()) {
  await run(op, i);
}
out({ done: true });
await client.dispose();
process.exit(0);
