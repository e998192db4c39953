// A cluster's latest rolling reboot (the latest of any without one), read again on a short interval (apelora-worker's
// progress is read by polling) and when a change is recorded.
import { useQuery } from 'urql';
import { RollingRebootQuery } from '../api/rolling';
import { useLiveRefresh, useRefresh } from './live';

export function useRollingReboot(cluster?: string) {
  const [res, reexecute] = useQuery({ query: RollingRebootQuery, variables: { cluster } });
  const refresh = useRefresh(res.fetching, reexecute);
  useLiveRefresh(refresh);
  return { res, refresh };
}
