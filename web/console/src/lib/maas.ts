// MAAS step inputs as the operator types them.
export const maxTests = 16;

// parseTests splits a list of test names or tags; the server checks each name again.
export function parseTests(s: string): { tests: string[]; error?: string } {
  const tests = s.split(/[\s,]+/).map((t) => t.trim()).filter(Boolean);
  if (tests.length > maxTests) return { tests, error: `${tests.length} tests named: at most ${maxTests} per request.` };
  const seen = new Set<string>();
  for (const t of tests) {
    if (seen.has(t)) return { tests, error: `"${t}" is named twice.` };
    seen.add(t);
  }
  return { tests };
}

export interface ImageLike {
  name: string;
  architectures: string[];
}

// offeredImages are the images an install on a machine of architecture arch (MAAS's form,
// amd64/generic) may name: those with an image for its architecture, or all when the
// machine's architecture is not known yet.
export function offeredImages<T extends ImageLike>(images: T[], arch: string | null | undefined): T[] {
  const base = arch?.split('/')[0];
  if (!base) return images;
  return images.filter((im) => im.architectures.some((a) => a.split('/')[0] === base));
}

// defaultImage is the image the install dialog starts with: the newest Ubuntu release
// offered (Ubuntu names its releases in alphabetical order), else the first image.
export function defaultImage(images: ImageLike[]): string {
  const ubuntu = images.filter((im) => im.name.startsWith('ubuntu/')).map((im) => im.name).sort();
  return ubuntu[ubuntu.length - 1] ?? images[0]?.name ?? '';
}
