// The cluster chooser of the approve, install and bulk install dialogs: which cluster it
// starts on, and whether there is anything to choose.

export interface ClusterChoice {
  name: string;
  // fromEnvironment: the cluster of APELORA_INCUS_* (the server's default for a machine
  // record that names no cluster).
  fromEnvironment: boolean;
}

// defaultCluster is the cluster the chooser starts on: the machine's own (the one its
// record or member names) while it is registered, else the cluster of APELORA_INCUS_*,
// else the first listed; '' when no cluster is listed (yet).
export function defaultCluster(clusters: ClusterChoice[], current?: string | null): string {
  if (current && clusters.some((c) => c.name === current)) return current;
  return clusters.find((c) => c.fromEnvironment)?.name ?? clusters[0]?.name ?? '';
}

// onlyChoice is the one cluster when only one is registered: the chooser shows it
// read-only (there is nothing to choose); null otherwise.
export function onlyChoice(clusters: ClusterChoice[]): string | null {
  return clusters.length === 1 ? clusters[0].name : null;
}
