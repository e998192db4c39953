// A button that copies a text to the clipboard and says, in words, whether it did.
import { useState } from 'react';

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setState('copied');
    } catch {
      setState('failed');
    }
  };
  return (
    <>
      <button type="button" className="btn btn-plain btn-small" onClick={copy}>
        {label}
      </button>
      <span role="status" className="copy-state">
        {state === 'copied' ? '✓ Copied' : state === 'failed' ? 'Copy failed: select the text and copy it by hand.' : ''}
      </span>
    </>
  );
}
