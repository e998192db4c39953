// A machine's drift, live: read again whenever the drift watcher raises or clears a check
// for it (driftChanges, from any replica).
import { useEffect, useRef } from 'react';
import { useQuery, useSubscription } from 'urql';
import { DriftChangesSubscription, MachineDriftQuery } from '../api/drift';

// useDrift reads the machine's drift, and again at each change of it; onChange hears each
// change too (the machine's page reads its DRIFT warnings again).
export function useDrift(name: string, onChange: () => void) {
  const [res, reexecute] = useQuery({ query: MachineDriftQuery, variables: { name }, requestPolicy: 'network-only' });
  const [change] = useSubscription({ query: DriftChangesSubscription, variables: { machine: name, after: null } });
  const changeId = change.data?.driftChanges.id;
  const changed = useRef(onChange);
  changed.current = onChange;
  useEffect(() => {
    if (!changeId) return;
    reexecute({ requestPolicy: 'network-only' });
    changed.current();
  }, [changeId, reexecute]);
  return res;
}
