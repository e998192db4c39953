// TestsField is the MAAS steps' field for the testing scripts or tags to run.
import { Field } from './ui';
import { maxTests, parseTests } from '../lib/maas';

export function TestsField({ value, onChange, error, label }: { value: string; onChange(v: string): void; error?: string; label: string }) {
  const parsed = parseTests(value);
  return (
    <Field label={label} error={error ?? parsed.error} hint={`Script names or tags, separated by commas or spaces; at most ${maxTests}. Empty: MAAS's defaults.`}>
      {(a) => <input {...a} className="input" value={value} onChange={(e) => onChange(e.target.value)} spellCheck={false} autoComplete="off" name="tests" />}
    </Field>
  );
}
