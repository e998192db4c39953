// Identities: who is signed in, and every identity, read again when a change is recorded
// through Apelora (the only way they change).
import { useQuery } from 'urql';
import { IdentitiesQuery, ViewerQuery } from '../api/identities';
import { useChangeRefresh, useRefresh } from './live';

// useViewerQuery reads who is signed in and what they may do, once per session (the
// shell provides it to every page: viewer.tsx).
export function useViewerQuery() {
  const [res] = useQuery({ query: ViewerQuery, requestPolicy: 'network-only' });
  return res;
}

// useIdentities is the identities page's read, and a way to read it again.
export function useIdentities() {
  const [res, reexecute] = useQuery({ query: IdentitiesQuery, requestPolicy: 'cache-and-network' });
  const refresh = useRefresh(res.fetching, reexecute);
  useChangeRefresh(refresh);
  return { res, refresh };
}
