// How the console words facts it shows: what MAAS has not inventoried yet, a status with
// its message, and which fleet columns an administrator chose to see.

// MAAS reports 0 CPUs, 0 memory and 0 storage for a machine it has not commissioned (New,
// Commissioning, a failed commissioning): that 0 means "not known yet", never "none".
const notInventoried = new Set(['new', 'commissioning', 'failed commissioning']);

export interface MaasHardwareLike {
  status: string;
  architecture?: string | null;
  cpuCount: number;
  memoryMiB: number;
  storageMB: number;
}

function plural(n: number, one: string): string {
  return `${n} ${one}${n === 1 ? '' : 's'}`;
}

// memoryText rounds to GiB from 1 GiB up; below that MiB says more.
export function memoryText(mib: number): string {
  if (mib <= 0) return 'memory unknown';
  return mib < 1024 ? `${mib} MiB` : `${Math.round(mib / 1024)} GiB`;
}

export function storageText(mb: number): string {
  if (mb <= 0) return 'storage unknown';
  return mb < 1000 ? `${mb} MB storage` : `${Math.round(mb / 1000)} GB storage`;
}

// maasHardware says what MAAS inventoried: each 0 is "unknown", and a machine MAAS has not
// commissioned yet says so once instead of three zeros.
export function maasHardware(m: MaasHardwareLike): string {
  const arch = m.architecture || 'architecture unknown';
  if (m.cpuCount <= 0 && m.memoryMiB <= 0 && m.storageMB <= 0) {
    return notInventoried.has(m.status.trim().toLowerCase())
      ? `${arch} · CPUs, memory and storage unknown until MAAS commissions it`
      : `${arch} · CPUs, memory and storage unknown (MAAS reports none)`;
  }
  return [arch, m.cpuCount > 0 ? plural(m.cpuCount, 'CPU') : 'CPUs unknown', memoryText(m.memoryMiB), storageText(m.storageMB)].join(' · ');
}

// statusText joins a status and its message, leaving the message out when it only repeats
// the status (MAAS's status_message is often the status itself: "Deployed — Deployed").
export function statusText(status: string, message?: string | null): string {
  const m = (message ?? '').trim();
  if (!m || m.toLowerCase() === status.trim().toLowerCase()) return status;
  return `${status} — ${m}`;
}

// The fleet table's columns an administrator may hide; the name column always shows.
export const fleetColumns = ['phase', 'cluster', 'warnings', 'provisioner', 'member', 'maas', 'power', 'testing', 'actions'] as const;
export type FleetColumn = (typeof fleetColumns)[number];

// parseHiddenColumns reads the stored choice (a comma-separated list of hidden columns);
// names it does not know are dropped, so a choice stored by an older console still works.
export function parseHiddenColumns(stored: string | null | undefined): Set<FleetColumn> {
  const known = new Set<string>(fleetColumns);
  return new Set((stored ?? '').split(',').map((s) => s.trim()).filter((s) => known.has(s)) as FleetColumn[]);
}

// hiddenColumnsText writes the choice back in the table's own order.
export function hiddenColumnsText(hidden: ReadonlySet<FleetColumn>): string {
  return fleetColumns.filter((c) => hidden.has(c)).join(',');
}

// The machine page's tabs, in order; ?tab= names one (no tab: the overview).
export const machineTabs = [
  { id: 'overview', label: 'Overview' },
  { id: 'admission', label: 'Admission and drift' },
  { id: 'hardware', label: 'MAAS hardware' },
  { id: 'fencing', label: 'Fencing' },
  { id: 'history', label: 'History' },
] as const;
export type MachineTab = (typeof machineTabs)[number]['id'];

export function parseMachineTab(v: string | null | undefined): MachineTab {
  return machineTabs.find((t) => t.id === v)?.id ?? 'overview';
}

// bytesText sizes a disk as it is sold: decimal units (a "3.84 TB" drive).
export function bytesText(bytes: number): string {
  if (bytes <= 0) return 'unknown';
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let v = bytes;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? v : Number(v.toPrecision(3))} ${units[i]}`;
}

// speedText: MAAS's link speeds in Mbit/s; null (no link, or a driver that does not say)
// is "unknown", never 0.
export function speedText(mbps: number | null | undefined): string {
  if (!mbps || mbps <= 0) return 'unknown';
  return mbps >= 1000 ? `${+(mbps / 1000).toFixed(1)} Gbit/s` : `${mbps} Mbit/s`;
}

// durationText: a script's run time, "—" until it ended.
export function durationText(seconds: number | null | undefined): string {
  if (seconds == null) return '—';
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (h > 0) return `${h} h ${m} min`;
  if (m > 0) return s ? `${m} min ${s} s` : `${m} min`;
  return `${s} s`;
}
