// The cluster chooser of the approve, install and bulk install dialogs: the registered
// clusters (the clusters query), starting on the machine's own cluster or, for a machine
// in none, the cluster of APELORA_INCUS_*. With one cluster registered it shows that one,
// read-only: there is nothing to choose.
import { useClusterChoices } from '../hooks/clusters';
import { defaultCluster, onlyChoice } from '../lib/clusters';
import { problemsOf } from '../lib/errors';
import { Field, Loading } from './ui';

// useClusterChooser reads the registered clusters; picked is the operator's pick ('' until
// there is one: then the default counts). cluster is what the input sends: null while the
// list is not read (the server's own default then holds). For a set of machines (eachOwn),
// there is no one default: nothing picked leaves each machine in its record's cluster.
export function useClusterChooser(current: string | null | undefined, picked: string, eachOwn = false) {
  const res = useClusterChoices();
  const clusters = res.data?.clusters ?? [];
  const valid = picked && clusters.some((c) => c.name === picked) ? picked : '';
  const chosen = valid || (eachOwn ? '' : defaultCluster(clusters, current));
  return { res, clusters, cluster: chosen || null, eachOwn };
}

export function ClusterChooser({
  chooser,
  error,
  onChange,
  hint,
}: {
  chooser: ReturnType<typeof useClusterChooser>;
  error?: string;
  onChange(name: string): void;
  hint?: string;
}) {
  const { res, clusters, cluster, eachOwn } = chooser;
  if (res.fetching && !res.data) return <Loading what="the registered clusters" />;
  const why = hint ?? 'The Incus cluster it joins: the join token comes from it, and the machine record names it afterwards.';
  if (res.error && !res.data) {
    return (
      <Field label="Cluster" error={error} hint={`The registered clusters could not be read (${problemsOf(res.error)[0]?.message ?? 'no answer'}): the server chooses the machine's own cluster.`}>
        {(a) => <input {...a} className="input" value="" placeholder="the machine's own" readOnly name="cluster" data-cluster-chooser="" />}
      </Field>
    );
  }
  const only = onlyChoice(clusters);
  if (only) {
    return (
      <Field label="Cluster" error={error} hint={`${why} It is the only cluster registered.`}>
        {(a) => <input {...a} className="input" value={only} readOnly name="cluster" data-cluster-chooser={only} />}
      </Field>
    );
  }
  const value = cluster ?? '';
  return (
    <Field label="Cluster" error={error} hint={why}>
      {(a) => (
        <select {...a} className="input" value={value} onChange={(e) => onChange(e.target.value)} name="cluster" data-cluster-chooser={value}>
          {eachOwn ? <option value="">Each machine's own cluster</option> : null}
          {clusters.map((c) => (
            <option key={c.name} value={c.name}>
              {c.name}
              {c.fromEnvironment ? ' (APELORA_INCUS_*)' : ''}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}
