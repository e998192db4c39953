// A member's evacuations and restores: the last ones, and the progress of one that runs,
// pushed live (memberOperation, from any replica) as Incus stops, moves or starts each
// instance.
import { useEffect, useRef } from 'react';
import { useQuery, useSubscription } from 'urql';
import { MemberOperationSubscription, MemberOperationsQuery } from '../api/maintenance';

export type OperationEvent = { id: string; operationId: string; action: string; at: string; kind: string; message: string };

// useMemberOperations reads the member's operations, and again at each progress event;
// onChange hears when one ends (the member's phase becomes EVACUATED, or leaves it).
export function useMemberOperations(name: string, onChange: () => void) {
  const [ops, reexecute] = useQuery({ query: MemberOperationsQuery, variables: { name }, requestPolicy: 'network-only' });
  const [sub] = useSubscription(
    { query: MemberOperationSubscription, variables: { name, after: null } },
    (prev: OperationEvent[] | undefined, d) => [...(prev ?? []), d.memberOperation].slice(-50),
  );
  const events = sub.data ?? [];
  const last = events[events.length - 1];
  const ended = last && last.kind !== 'STARTED' && last.kind !== 'PROGRESS' ? last.id : undefined;
  const changed = useRef(onChange);
  changed.current = onChange;
  useEffect(() => {
    if (!last) return;
    reexecute({ requestPolicy: 'network-only' });
    if (ended) changed.current();
  }, [last?.id, ended, reexecute]);
  return { ops, events, last };
}
