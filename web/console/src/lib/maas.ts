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
