// What MAAS knows of a machine beyond its facts (its disks, interfaces and script results),
// and the images MAAS holds. Each is a MAAS read, asked only where it is shown.
import { useQuery } from 'urql';
import { MaasImagesQuery, MachineMaasHardwareQuery } from '../api/maas';

// useMaasHardware is the machine's MAAS hardware tables (the machine page's hardware tab).
export function useMaasHardware(name: string) {
  const [res] = useQuery({ query: MachineMaasHardwareQuery, variables: { name }, requestPolicy: 'cache-and-network' });
  return res;
}

// useMaasImages is the OS images MAAS holds, when it lets Apelora's key list them.
export function useMaasImages() {
  const [res] = useQuery({ query: MaasImagesQuery, requestPolicy: 'network-only' });
  return res;
}
