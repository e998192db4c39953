// The machine page's MAAS hardware tables, as maas-ui shows them: storage, network
// interfaces, and each script of the latest commissioning and hardware-test runs. Read only
// while the tab shows: each list is a MAAS read for this one machine.
import { useMaasHardware } from '../hooks/maas';
import { problemsOf } from '../lib/errors';
import { bytesText, durationText, speedText } from '../lib/display';
import { Loading, Problems, Time } from '../components/ui';

const unknown = <span className="muted">unknown</span>;

export function MaasHardwareTables({ name }: { name: string }) {
  const res = useMaasHardware(name);
  if (res.error && !res.data) return <Problems problems={problemsOf(res.error)} machine={name} />;
  if (!res.data) return <Loading what={`${name}'s MAAS hardware`} />;
  const maas = res.data.machine?.maas;
  if (!maas) return null;
  const failed = maas.scriptResults.filter((r) => r.failed);
  return (
    <div className="hw-cards">
      <section className="card" aria-labelledby="maas-storage">
        <h2 id="maas-storage">Storage</h2>
        {maas.storageDevices.length === 0 ? (
          <p className="muted">No storage inventoried: MAAS lists a machine's disks once it has commissioned it (status {maas.status}).</p>
        ) : (
          <div className="table-wrap">
            <table className="table hw-table">
              <caption className="visually-hidden">Storage devices MAAS found on {name}</caption>
              <thead>
                <tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Model</th><th scope="col">Serial</th><th scope="col">Size</th></tr>
              </thead>
              <tbody>
                {maas.storageDevices.map((d) => (
                  <tr key={d.name}>
                    <th scope="row">{d.name}</th>
                    <td>{d.type}</td>
                    <td>{d.model ?? unknown}</td>
                    <td>{d.serial ?? unknown}</td>
                    <td className="num">{d.sizeBytes > 0 ? bytesText(d.sizeBytes) : unknown}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      <section className="card" aria-labelledby="maas-interfaces">
        <h2 id="maas-interfaces">Network interfaces</h2>
        {maas.networkInterfaces.length === 0 ? (
          <p className="muted">MAAS knows no network interface of this machine.</p>
        ) : (
          <div className="table-wrap">
            <table className="table hw-table">
              <caption className="visually-hidden">Network interfaces MAAS knows on {name}</caption>
              <thead>
                <tr><th scope="col">Name</th><th scope="col">MAC address</th><th scope="col">Link</th><th scope="col">Link speed</th><th scope="col">Interface speed</th><th scope="col">Fabric / VLAN</th></tr>
              </thead>
              <tbody>
                {maas.networkInterfaces.map((n) => (
                  <tr key={n.name}>
                    <th scope="row">{n.name}{n.type !== 'physical' ? ` (${n.type})` : ''}</th>
                    <td className="mono">{n.macAddress}</td>
                    <td>{n.linkConnected ? 'connected' : 'no link'}</td>
                    <td>{n.linkSpeedMbps ? speedText(n.linkSpeedMbps) : unknown}</td>
                    <td>{n.interfaceSpeedMbps ? speedText(n.interfaceSpeedMbps) : unknown}</td>
                    <td>{n.fabric || n.vlan ? `${n.fabric ?? 'unknown'} / ${n.vlan ?? 'unknown'}` : unknown}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      <section className="card" aria-labelledby="maas-scripts">
        <h2 id="maas-scripts">Commissioning and test scripts</h2>
        {maas.scriptResults.length === 0 ? (
          <p className="muted">No script results: MAAS has not commissioned or tested this machine yet.</p>
        ) : (
          <>
            {failed.length > 0 ? (
              <p className="error-text" role="note">
                ✕ {failed.length === 1 ? '1 script failed' : `${failed.length} scripts failed`}: {failed.map((r) => r.name).join(', ')}
              </p>
            ) : null}
            <div className="table-wrap">
              <table className="table hw-table">
                <caption className="visually-hidden">Script results of {name}'s latest commissioning and hardware tests</caption>
                <thead>
                  <tr><th scope="col">Script</th><th scope="col">Run</th><th scope="col">Tests</th><th scope="col">Status</th><th scope="col">Started</th><th scope="col">Ended</th><th scope="col">Duration</th></tr>
                </thead>
                <tbody>
                  {maas.scriptResults.map((r) => (
                    <tr key={`${r.kind}/${r.name}`} className={r.failed ? 'script-failed' : undefined} data-failed={r.failed ? 'true' : undefined}>
                      <th scope="row">{r.name}</th>
                      <td>{r.kind === 'COMMISSIONING' ? 'commissioning' : 'testing'}</td>
                      <td>{r.hardwareType ?? unknown}</td>
                      <td>{r.failed ? <strong>✕ {r.status}</strong> : r.status}</td>
                      <td>{r.started ? <Time at={r.started} /> : '—'}</td>
                      <td>{r.ended ? <Time at={r.ended} /> : '—'}</td>
                      <td className="num">{durationText(r.durationSeconds)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </>
        )}
      </section>
    </div>
  );
}
