// Hardware profiles as the console shows and edits them.
export interface ProfileLike {
  name: string;
  description: string;
  architecture: string;
  minCpuCores: number;
  minMemoryMiB: number;
  minDisks: number;
  minDiskSizeGB: number;
  minNics: number;
  minNicSpeedMbps: number;
}

// The architectures the server accepts, in the kernel's names (Incus reports these).
export const architectures = ['x86_64', 'aarch64', 'ppc64le', 's390x', 'riscv64', 'i686', 'armv7l', 'loongarch64'];

function memory(mib: number): string {
  if (mib % 1024 === 0) return `${mib / 1024} GiB`;
  return `${mib} MiB`;
}

function speed(mbps: number): string {
  return mbps >= 1000 && mbps % 1000 === 0 ? `${mbps / 1000} Gbit/s` : `${mbps} Mbit/s`;
}

// requirements says what a profile asks, in words; a minimum of 0 asks nothing.
export function requirements(p: ProfileLike): string[] {
  const out = [p.architecture];
  if (p.minCpuCores) out.push(`≥ ${p.minCpuCores} CPU${p.minCpuCores > 1 ? 's' : ''}`);
  if (p.minMemoryMiB) out.push(`≥ ${memory(p.minMemoryMiB)} memory`);
  if (p.minDisks) out.push(`≥ ${p.minDisks} disk${p.minDisks > 1 ? 's' : ''}${p.minDiskSizeGB ? ` of ≥ ${p.minDiskSizeGB} GB` : ''}`);
  if (p.minNics) out.push(`≥ ${p.minNics} NIC${p.minNics > 1 ? 's' : ''}${p.minNicSpeedMbps ? ` at ≥ ${speed(p.minNicSpeedMbps)}` : ''}`);
  return out;
}

// The form keeps numbers as typed; toNumber reads one (blank: 0, asks nothing).
export function toNumber(s: string): number {
  const t = s.trim();
  if (!t) return 0;
  const n = Number(t);
  return Number.isFinite(n) ? Math.trunc(n) : NaN;
}

export const numberFields: { key: keyof ProfileLike & `min${string}`; label: string; hint: string }[] = [
  { key: 'minCpuCores', label: 'Minimum CPUs', hint: 'Logical CPUs (hardware threads).' },
  { key: 'minMemoryMiB', label: 'Minimum memory (MiB)', hint: '65536 MiB is 64 GiB.' },
  { key: 'minDisks', label: 'Minimum disks', hint: 'How many disks must have at least the size below.' },
  { key: 'minDiskSizeGB', label: 'Minimum disk size (GB)', hint: 'Decimal gigabytes, as disks are sold; needs a number of disks.' },
  { key: 'minNics', label: 'Minimum network ports', hint: 'How many ports must reach the speed below.' },
  { key: 'minNicSpeedMbps', label: 'Minimum port speed (Mbit/s)', hint: '25000 is 25 Gbit/s; needs a number of ports. A port whose speed is unknown makes the check warn.' },
];
