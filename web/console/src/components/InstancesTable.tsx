// InstancesTable lists what the plan of an evacuation or restore says happens to each
// instance (the payload of the dry run the dialog asked for).
import type { InstanceFate } from '../gql/graphql';

const fateText: Record<InstanceFate, string> = {
  MOVE: 'moved (Incus picks migrate or live-migrate)',
  MIGRATE: 'stopped, moved, started again',
  LIVE_MIGRATE: 'moved while running',
  STOP: 'only stopped: stays here until restored',
  RETURN: 'moved back here',
  START: 'started again here',
};

export interface PlannedInstance {
  project: string;
  name: string;
  status: string;
  fate: InstanceFate;
}

// InstancesTable lists what the plan of an evacuation or restore says happens to each
// instance (the payload of the dry run the dialog asked for).
export function InstancesTable({ instances, caption }: { instances: PlannedInstance[] | null; caption: string }) {
  if (!instances) return <p className="muted">Waiting for the plan…</p>;
  if (instances.length === 0) return <p className="muted" data-instances="0">No instance is affected.</p>;
  return (
    <table className="table" data-instances={instances.length}>
      <caption className="visually-hidden">{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Instance</th>
          <th scope="col">Status</th>
          <th scope="col">What Incus does</th>
        </tr>
      </thead>
      <tbody>
        {instances.map((i) => (
          <tr key={`${i.project}/${i.name}`} data-instance={i.name} data-fate={i.fate}>
            <th scope="row">{i.project && i.project !== 'default' ? `${i.project}/${i.name}` : i.name}</th>
            <td>{i.status}</td>
            <td>{fateText[i.fate]}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
