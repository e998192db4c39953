// A member's maintenance tasks (evacuations and restores): the last ones, and the progress
// of one that runs, pushed live (maintenanceTask, from any replica) as Incus stops, moves
// or starts each instance.
import { useEffect, useRef } from 'react';
import { useQuery, useSubscription } from 'urql';
import { MaintenanceTaskSubscription, MaintenanceTasksQuery } from '../api/maintenance';

export type TaskEvent = { id: string; taskId: string; action: string; at: string; kind: string; message: string };

// useMaintenanceTasks reads the member's maintenance tasks, and again at each progress
// event; onChange hears when one ends (the member's phase becomes EVACUATED, or leaves it).
export function useMaintenanceTasks(name: string, onChange: () => void) {
  const [tasks, reexecute] = useQuery({ query: MaintenanceTasksQuery, variables: { name }, requestPolicy: 'network-only' });
  const [sub] = useSubscription(
    { query: MaintenanceTaskSubscription, variables: { name, after: null } },
    (prev: TaskEvent[] | undefined, d) => [...(prev ?? []), d.maintenanceTask].slice(-50),
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
  return { tasks, events, last };
}
