// One machine, live: read again when a change to it is recorded, on a short interval, and
// at each fence event of the member.
import { useEffect } from 'react';
import { useQuery, useSubscription } from 'urql';
import { MachineQuery } from '../api/machines';
import { FenceProgressSubscription } from '../api/fencing';
import { useLiveRefresh, useRefresh } from './live';

// useMachine is the machine page's read of the machine, and a way to read it again.
export function useMachine(name: string) {
  const [res, reexecute] = useQuery({ query: MachineQuery, variables: { name } });
  const refresh = useRefresh(res.fetching, reexecute);
  useLiveRefresh(refresh, name);
  // Fence progress for this member arrives live: read the machine again on each event.
  const [fence] = useSubscription({ query: FenceProgressSubscription, variables: { member: name, after: null } });
  const fenceEvent = fence.data?.fenceProgress.id;
  useEffect(() => {
    if (fenceEvent) refresh();
  }, [fenceEvent, refresh]);
  return { res, refresh };
}
