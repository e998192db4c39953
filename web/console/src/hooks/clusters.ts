// The Incus clusters, read again when a change is recorded through Apelora (registering
// and removing them happen only there; their members are read afresh each time).
import { useQuery } from 'urql';
import { ClusterChoicesQuery, ClustersQuery } from '../api/clusters';
import { useChangeRefresh, useRefresh } from './live';

// useClusters is the clusters page's read, and a way to read it again.
export function useClusters() {
  const [res, reexecute] = useQuery({ query: ClustersQuery, requestPolicy: 'cache-and-network' });
  const refresh = useRefresh(res.fetching, reexecute);
  useChangeRefresh(refresh);
  return { res, refresh };
}

// useClusterChoices is the registered clusters' names, for the cluster chooser.
export function useClusterChoices() {
  const [res] = useQuery({ query: ClusterChoicesQuery, requestPolicy: 'cache-and-network' });
  return res;
}
