// Hardware profiles, read again when a change is recorded through Apelora (the only way
// they change).
import { useQuery } from 'urql';
import { HardwareProfilesQuery } from '../api/hardware';
import { useChangeRefresh, useRefresh } from './live';

// useHardwareProfiles is the hardware page's read, and a way to read it again.
export function useHardwareProfiles() {
  const [res, reexecute] = useQuery({ query: HardwareProfilesQuery, requestPolicy: 'cache-and-network' });
  const refresh = useRefresh(res.fetching, reexecute);
  useChangeRefresh(refresh);
  return { res, refresh };
}

// useHardwareProfileChoices is every profile as it is now, to choose one from (asked
// afresh each time a dialog opens).
export function useHardwareProfileChoices() {
  const [res] = useQuery({ query: HardwareProfilesQuery, requestPolicy: 'network-only' });
  return res;
}
