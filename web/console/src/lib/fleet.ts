// The fleet table's rules: which rows a filter keeps, in which order, and how the filter
// lives in the URL (so a filtered view can be bookmarked, shared and reloaded).
import type { FleetRowFragment, Phase, WarningCode } from '../gql/graphql';
import { phaseOrder, warningLabels } from './phases';

export type Row = FleetRowFragment;
export type Provisioner = 'MANUAL' | 'MAAS' | 'NONE';
export type SortKey = 'name' | 'phase' | 'cluster' | 'provisioner' | 'member' | 'maas' | 'power' | 'testing';
export const sortKeys: SortKey[] = ['name', 'phase', 'cluster', 'provisioner', 'member', 'maas', 'power', 'testing'];

export interface FleetFilter {
  phases: Phase[];
  // 'any' keeps rows with at least one warning, 'none' rows without.
  warning: WarningCode | 'any' | 'none' | '';
  provisioner: Provisioner | '';
  // The Incus cluster's name ('' any; noCluster: rows in none).
  cluster: string;
  q: string;
  sort: SortKey;
  desc: boolean;
}

export const emptyFilter: FleetFilter = { phases: [], warning: '', provisioner: '', cluster: '', q: '', sort: 'name', desc: false };

// noCluster is the cluster filter's value for rows in no cluster ('-' is no cluster's name).
export const noCluster = '-';

// provisionerOf: a record's provisioner; a machine only MAAS knows is MAAS's; a member
// with no record has none.
export function provisionerOf(r: Row): Provisioner {
  if (r.record) return r.record.provisioner.kind;
  return r.maas ? 'MAAS' : 'NONE';
}

const searchIndex = new WeakMap<Row, string>();

// searchText is what a search matches: name, MAAS hostname, system ids and hardware UUIDs.
export function searchText(r: Row): string {
  let s = searchIndex.get(r);
  if (s === undefined) {
    s = [r.name, r.maas?.hostname, r.maas?.systemId, r.record?.maasSystemId, r.maas?.hardwareUuid, r.record?.hardwareUuid]
      .filter(Boolean)
      .join('\n')
      .toLowerCase();
    searchIndex.set(r, s);
  }
  return s;
}

export function matches(r: Row, f: FleetFilter): boolean {
  if (f.phases.length > 0 && !f.phases.includes(r.phase)) return false;
  if (f.provisioner && provisionerOf(r) !== f.provisioner) return false;
  if (f.cluster && (r.cluster?.name ?? noCluster) !== f.cluster) return false;
  switch (f.warning) {
    case '':
      break;
    case 'any':
      if (r.warnings.length === 0) return false;
      break;
    case 'none':
      if (r.warnings.length > 0) return false;
      break;
    default:
      if (!r.warnings.some((w) => w.code === f.warning)) return false;
  }
  const q = f.q.trim().toLowerCase();
  return q === '' || searchText(r).includes(q);
}

function sortValue(r: Row, k: SortKey): string | number {
  switch (k) {
    case 'name':
      return r.name;
    case 'phase':
      return phaseOrder.indexOf(r.phase);
    case 'cluster':
      return r.cluster ? r.cluster.name : '~';
    case 'provisioner':
      return provisionerOf(r);
    case 'member':
      return r.member ? r.member.status : '~';
    case 'maas':
      return r.maas ? r.maas.status : '~';
    case 'power':
      return r.maas ? r.maas.powerState : '~';
    case 'testing':
      return r.maas ? r.maas.testingStatus : '~';
  }
}

const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

export function compareRows(a: Row, b: Row, k: SortKey): number {
  const va = sortValue(a, k);
  const vb = sortValue(b, k);
  const c = typeof va === 'number' && typeof vb === 'number' ? va - vb : collator.compare(String(va), String(vb));
  return c !== 0 || k === 'name' ? c : collator.compare(a.name, b.name);
}

export function applyFilter(rows: readonly Row[], f: FleetFilter): Row[] {
  return filterRows(sortRows(rows, f.sort, f.desc), f);
}

// sortRows orders every row once per order and fleet: a keystroke in the search then only
// filters the sorted rows (filterRows keeps their order), rather than sorting again.
export function sortRows(rows: readonly Row[], sort: SortKey, desc: boolean): Row[] {
  const out = [...rows].sort((a, b) => compareRows(a, b, sort));
  if (desc) out.reverse();
  return out;
}

export function filterRows(sorted: readonly Row[], f: FleetFilter): Row[] {
  return sorted.filter((r) => matches(r, f));
}

const phaseSet = new Set<string>(phaseOrder);
// Every warning code the console labels (DRIFT included) is a filter value.
const warningValues = new Set<string>(['any', 'none', ...Object.keys(warningLabels)]);

// parseFilter reads a filter from the query string; values it does not know are ignored.
export function parseFilter(params: URLSearchParams): FleetFilter {
  const phases = (params.get('phase') ?? '').split(',').filter((p) => phaseSet.has(p)) as Phase[];
  const warning = params.get('warning') ?? '';
  const prov = params.get('provisioner') ?? '';
  const sort = params.get('sort') ?? 'name';
  const cluster = params.get('cluster') ?? '';
  return {
    phases,
    warning: warningValues.has(warning) ? (warning as FleetFilter['warning']) : '',
    provisioner: prov === 'MANUAL' || prov === 'MAAS' || prov === 'NONE' ? prov : '',
    // A cluster name (the member-name rule) or noCluster; anything else is ignored.
    cluster: cluster === noCluster || /^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/.test(cluster) ? cluster : '',
    q: (params.get('q') ?? '').slice(0, 200),
    sort: (sortKeys as string[]).includes(sort) ? (sort as SortKey) : 'name',
    desc: params.get('dir') === 'desc',
  };
}

// filterParams writes a filter to a query string, leaving defaults out.
export function filterParams(f: FleetFilter): URLSearchParams {
  const p = new URLSearchParams();
  if (f.phases.length) p.set('phase', f.phases.join(','));
  if (f.warning) p.set('warning', f.warning);
  if (f.provisioner) p.set('provisioner', f.provisioner);
  if (f.cluster) p.set('cluster', f.cluster);
  if (f.q) p.set('q', f.q);
  if (f.sort !== 'name') p.set('sort', f.sort);
  if (f.desc) p.set('dir', 'desc');
  return p;
}

// Paging: like MAAS's and LXD's consoles, the table shows one page of rows at a time, so a
// keystroke in the filter re-renders at most a page whatever the fleet's size.
export const pageSizes = [50, 100, 250, 500];
export const defaultPageSize = 100;

export interface Paging {
  page: number; // from 1
  size: number;
}

export function parsePaging(params: URLSearchParams): Paging {
  const size = Number(params.get('size'));
  const page = Math.floor(Number(params.get('page')));
  return { size: pageSizes.includes(size) ? size : defaultPageSize, page: page >= 1 ? page : 1 };
}

// pageOf returns the rows of one page (the last page when page is past the end), the page
// shown and how many pages there are.
export function pageOf<T>(rows: readonly T[], p: Paging): { rows: T[]; page: number; pages: number } {
  const pages = Math.max(1, Math.ceil(rows.length / p.size));
  const page = Math.min(p.page, pages);
  return { rows: rows.slice((page - 1) * p.size, page * p.size), page, pages };
}
