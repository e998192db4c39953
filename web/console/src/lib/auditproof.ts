// An inclusion proof checked in the browser (RFC 9162 §2.1.3.2, RFC 6962 hashing), so
// the console does not take the server's word that an event is in the signed tree: the
// leaf hash and the proof's hashes, combined in turn, must give the checkpoint's root.

export type Digest = (data: Uint8Array<ArrayBuffer>) => Promise<Uint8Array<ArrayBuffer>>;

// sha256 is the browser's SHA-256, or null where it has none (WebCrypto needs a secure
// context: HTTPS, or localhost).
export function browserSHA256(): Digest | null {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  return async (data) => new Uint8Array(await subtle.digest('SHA-256', data));
}

function fromBase64(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

async function nodeHash(digest: Digest, left: Uint8Array, right: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
  const b = new Uint8Array(1 + left.length + right.length);
  b[0] = 1;
  b.set(left, 1);
  b.set(right, 1 + left.length);
  return digest(b);
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export interface ProofInput {
  leafIndex: number;
  treeSize: number;
  leafHash: string; // base64
  hashes: string[]; // base64, from the leaf's side up
  rootHash: string; // base64
}

// checkInclusion says whether the proof leads from the leaf to the root.
export async function checkInclusion(p: ProofInput, digest: Digest): Promise<boolean> {
  if (!(p.leafIndex >= 0 && p.leafIndex < p.treeSize)) return false;
  // Tree sizes stay far below 2^53 here; BigInt keeps the shifts exact anyway.
  let fn = BigInt(p.leafIndex);
  let sn = BigInt(p.treeSize - 1);
  let r = fromBase64(p.leafHash);
  for (const h of p.hashes) {
    const sibling = fromBase64(h);
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      r = await nodeHash(digest, sibling, r);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = await nodeHash(digest, r, sibling);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && equal(r, fromBase64(p.rootHash));
}
