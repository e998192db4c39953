// Member-config overrides, one row per value (entity / name / key / value), for the
// approve and install dialogs. The server's error for an entry is shown beside its row.
import { useId, useRef, useState } from 'react';
import { configEntities, configInput, emptyRow, rowErrors, type ConfigRow } from '../lib/memberConfig';

// useMemberConfig keeps the rows and remembers which row each sent entry came from, so the
// server's memberConfig.N errors land beside the right row.
export function useMemberConfig() {
  const [rows, setRows] = useState<ConfigRow[]>([]);
  const sent = useRef<number[]>([]);
  const input = () => {
    const c = configInput(rows);
    sent.current = c.rowOf;
    return c.input.length ? c.input : null;
  };
  // fieldNames: what the dialog shows beside fields rather than in its list of problems.
  const fieldNames = ['memberConfig', ...rows.map((_, i) => `memberConfig.${i}`)];
  return { rows, setRows, input, sent, fieldNames };
}

export function MemberConfigRows({ state, errors }: { state: ReturnType<typeof useMemberConfig>; errors: Map<string, string> }) {
  const { rows, setRows, sent } = state;
  const byRow = rowErrors(errors, sent.current);
  const general = errors.get('memberConfig');
  const id = useId();
  const set = (i: number, patch: Partial<ConfigRow>) => setRows(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return (
    <fieldset className="member-config" aria-describedby={id + '-hint'}>
      <legend>Member configuration (optional)</legend>
      <p className="hint" id={id + '-hint'}>
        Values for the new member's own keys, such as a storage pool's <code>source</code> device. A key not given gets the driver's default for
        host-specific keys and an existing member's value for the others. The server checks each one against the keys the cluster lists.
      </p>
      {rows.length ? (
        <table className="config-rows">
          <thead>
            <tr>
              <th scope="col">Entity</th>
              <th scope="col">Name</th>
              <th scope="col">Key</th>
              <th scope="col">Value</th>
              <th scope="col"><span className="visually-hidden">Remove</span></th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r, i) => {
              const err = byRow.get(i);
              const errId = `${id}-row${i}-error`;
              const a = (what: string) => ({
                'aria-label': `Row ${i + 1} ${what}`,
                'aria-invalid': err ? true : undefined,
                'aria-describedby': err ? errId : undefined,
              });
              return [
                <tr key={i} className={err ? 'row-invalid' : undefined} data-config-row={i}>
                  <td>
                    <select className="input" value={r.entity} onChange={(e) => set(i, { entity: e.target.value })} {...a('entity')}>
                      {configEntities.map((x) => (
                        <option key={x} value={x}>{x}</option>
                      ))}
                    </select>
                  </td>
                  <td><input className="input" value={r.name} placeholder="local" spellCheck={false} autoComplete="off" onChange={(e) => set(i, { name: e.target.value })} {...a('name')} /></td>
                  <td><input className="input" value={r.key} placeholder="source" spellCheck={false} autoComplete="off" onChange={(e) => set(i, { key: e.target.value })} {...a('key')} /></td>
                  <td><input className="input" value={r.value} spellCheck={false} autoComplete="off" onChange={(e) => set(i, { value: e.target.value })} {...a('value')} /></td>
                  <td>
                    <button type="button" className="btn btn-plain btn-small" aria-label={`Remove row ${i + 1}`} onClick={() => setRows(rows.filter((_, j) => j !== i))}>
                      Remove
                    </button>
                  </td>
                </tr>,
                err ? (
                  <tr key={i + '-error'} className="row-error">
                    <td colSpan={5}>
                      <div className="field-error" id={errId} data-config-error={i}>
                        <span aria-hidden="true">✕ </span>
                        {err}
                      </div>
                    </td>
                  </tr>
                ) : null,
              ];
            })}
          </tbody>
        </table>
      ) : null}
      {general ? (
        <div className="field-error">
          <span aria-hidden="true">✕ </span>
          {general}
        </div>
      ) : null}
      <button type="button" className="btn btn-plain btn-small" onClick={() => setRows([...rows, emptyRow()])} data-add-config>
        Add a value
      </button>
    </fieldset>
  );
}
