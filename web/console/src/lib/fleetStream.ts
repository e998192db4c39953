// The fleet stream's rules on the client: a snapshot replaces everything held; a change
// applies to the rows held when it is the revision after the last one, and otherwise says
// a message was missed (the page subscribes again and gets a fresh snapshot). Rows stay in
// the server's order (by name), and a row that did not change keeps its object, so the
// table re-renders only the rows that changed and the filter's per-row caches stay warm.
import type { FleetUpdatesSubscription as Update } from '../gql/graphql';
import type { Row } from './fleet';

export type FleetUpdate = Update['fleetUpdates'];
export type Sources = NonNullable<FleetUpdate['sources']>;

export interface FleetState {
  revision: number;
  rows: Row[];
  sources: Sources | null;
  // missed: a change arrived that does not follow `revision`; the state is stale until the
  // next snapshot.
  missed: boolean;
}

export const emptyFleet: FleetState = { revision: 0, rows: [], sources: null, missed: false };

const byName = (a: Row, b: Row) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

export function applyUpdate(state: FleetState, u: FleetUpdate): FleetState {
  if (u.snapshot) {
    return { revision: u.revision, rows: [...u.added].sort(byName), sources: u.sources ?? state.sources, missed: false };
  }
  if (state.missed || state.revision === 0 || u.revision !== state.revision + 1) {
    return { ...state, missed: true };
  }
  const replace = new Map<string, Row>();
  for (const r of u.changed) replace.set(r.name, r);
  const removed = new Set(u.removed);
  let rows = state.rows;
  if (replace.size || removed.size) {
    rows = [];
    for (const r of state.rows) {
      if (removed.has(r.name)) continue;
      rows.push(replace.get(r.name) ?? r);
    }
  }
  if (u.added.length) rows = [...rows, ...u.added].sort(byName);
  return { revision: u.revision, rows, sources: u.sources ?? state.sources, missed: false };
}
