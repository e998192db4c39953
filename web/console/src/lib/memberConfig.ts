// Member-config overrides as rows in a form (entity / name / key / value). The server
// checks each entry against the keys the cluster lists and names the one at fault by its
// position in what was sent (extensions.details.index), which sentIndex maps back to a row.
export interface ConfigRow {
  entity: string;
  name: string;
  key: string;
  value: string;
}

export const configEntities = ['storage-pool', 'network'];

export function emptyRow(): ConfigRow {
  return { entity: 'storage-pool', name: '', key: '', value: '' };
}

function blank(r: ConfigRow): boolean {
  return !r.name.trim() && !r.key.trim() && !r.value;
}

// configInput is what is sent: every row but the blank ones, names and keys trimmed (a
// value is sent as typed), with the row each entry came from.
export function configInput(rows: ConfigRow[]): { input: ConfigRow[]; rowOf: number[] } {
  const input: ConfigRow[] = [];
  const rowOf: number[] = [];
  rows.forEach((r, i) => {
    if (blank(r)) return;
    input.push({ entity: r.entity, name: r.name.trim(), key: r.key.trim(), value: r.value });
    rowOf.push(i);
  });
  return { input, rowOf };
}

// rowErrors maps the server's memberConfig.N errors (N: position in what was sent) to the
// rows' own positions.
export function rowErrors(errors: Map<string, string>, rowOf: number[]): Map<number, string> {
  const out = new Map<number, string>();
  for (const [k, msg] of errors) {
    const m = /^memberConfig\.(\d+)$/.exec(k);
    if (!m) continue;
    const row = rowOf[Number(m[1])];
    if (row !== undefined) out.set(row, msg);
  }
  return out;
}
