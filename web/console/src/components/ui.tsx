// Small shared pieces: status badges (symbol + words, never colour alone), banners, the
// server's problems, labelled fields with their own error, and the button that stays
// visible when it cannot be pressed, saying why.
import { createContext, useContext, useEffect, useId, useState, type ReactNode, type ButtonHTMLAttributes } from 'react';
import { seconds } from '../lib/deadline';
import { timeText } from '../lib/words';
import type { CheckResult, MemberStatus, Phase } from '../gql/graphql';
import { checkSymbols, memberStatusInfo, phaseInfo } from '../lib/phases';
import { codeLabel, describe, fieldKey, type Problem } from '../lib/errors';
import type { Action } from '../lib/actions';

export function PhaseBadge({ phase }: { phase: Phase }) {
  const p = phaseInfo[phase];
  return (
    <span className={`badge tone-${p.tone}`} title={p.meaning} data-phase={phase}>
      <span aria-hidden="true">{p.symbol}</span> {p.label}
    </span>
  );
}

export function ResultBadge({ result }: { result: CheckResult }) {
  const r = checkSymbols[result];
  return (
    <span className={`badge tone-${r.tone}`} data-result={result}>
      <span aria-hidden="true">{r.symbol}</span> {r.label}
    </span>
  );
}

export function MemberStatusBadge({ status }: { status: MemberStatus }) {
  const s = memberStatusInfo[status];
  return (
    <span className={`badge tone-${s.tone}`}>
      <span aria-hidden="true">{s.symbol}</span> {s.label}
    </span>
  );
}

export function Banner({ tone, title, children }: { tone: 'negative' | 'caution' | 'info' | 'positive'; title: string; children?: ReactNode }) {
  const symbol = { negative: '✕', caution: '!', info: 'i', positive: '✓' }[tone];
  return (
    <div className={`banner tone-${tone}`} role={tone === 'negative' ? 'alert' : 'status'}>
      <span className="banner-symbol" aria-hidden="true">{symbol}</span>
      <div>
        <strong>{title}</strong>
        {children ? <div className="banner-body">{children}</div> : null}
      </div>
    </div>
  );
}

// Problems shows what the server said, except the field errors shown beside their fields
// (shownFields: field names, or field.index for one entry of a list).
export function Problems({ problems, machine, shownFields = [] }: { problems: Problem[]; machine?: string; shownFields?: string[] }) {
  const rest = problems.filter((p) => !p.field || !shownFields.includes(fieldKey(p)));
  if (rest.length === 0) return null;
  return (
    <div className="problems" role="alert">
      {rest.map((p, i) => (
        <p key={i}>
          <span aria-hidden="true">✕ </span>
          {describe(p, machine)}
          {p.code ? <span className="code"> — {codeLabel(p.code)}</span> : null}
        </p>
      ))}
    </div>
  );
}

export function Field({ label, error, hint, children, id }: { label: string; error?: string; hint?: ReactNode; children: (props: { id: string; 'aria-describedby'?: string; 'aria-invalid'?: boolean }) => ReactNode; id?: string }) {
  const auto = useId();
  const fid = id ?? auto;
  const hintId = hint ? fid + '-hint' : undefined;
  const errId = error ? fid + '-error' : undefined;
  const describedBy = [hintId, errId].filter(Boolean).join(' ') || undefined;
  return (
    <div className={error ? 'field field-invalid' : 'field'}>
      <label htmlFor={fid}>{label}</label>
      {children({ id: fid, 'aria-describedby': describedBy, 'aria-invalid': error ? true : undefined })}
      {hint ? <div className="hint" id={hintId}>{hint}</div> : null}
      {error ? (
        <div className="field-error" id={errId}>
          <span aria-hidden="true">✕ </span>
          {error}
        </div>
      ) : null}
    </div>
  );
}

type ButtonProps = Omit<ButtonHTMLAttributes<HTMLButtonElement>, 'disabled'> & {
  reason?: string;
  variant?: 'primary' | 'danger' | 'plain';
};

// ReasonButton is pressable unless reason is set; then it stays focusable (aria-disabled)
// and the reason is its description: read with it (aria-describedby) and shown as a tip
// while it is hovered or focused, not as a line under every button.
export function ReasonButton({ reason, variant = 'plain', children, onClick, className, ...rest }: ButtonProps) {
  const rid = useId();
  return (
    <span className="reason-button">
      <button
        type="button"
        className={`btn btn-${variant}${className ? ' ' + className : ''}`}
        aria-disabled={reason ? true : undefined}
        aria-describedby={reason ? rid : undefined}
        onClick={(e) => {
          if (reason) {
            e.preventDefault();
            return;
          }
          onClick?.(e);
        }}
        {...rest}
      >
        {children}
      </button>
      {reason ? (
        <span className="reason-tip" id={rid} role="tooltip">
          {reason}
        </span>
      ) : null}
    </span>
  );
}

export function ActionButton({ action, onRun, variant }: { action: Action; onRun(): void; variant?: 'primary' | 'danger' | 'plain' }) {
  return (
    <ReasonButton reason={action.reason} variant={variant} onClick={onRun} data-action={action.id}>
      {action.label}
    </ReasonButton>
  );
}

// RequestTimeoutContext is the server's request timeout (ms), as the page was told it.
export const RequestTimeoutContext = createContext(10000);

// Loading says what is on its way; after a moment it says why it may take a while: the
// server waits for Incus or MAAS up to its request timeout, then answers without them.
export function Loading({ what }: { what: string }) {
  const timeout = useContext(RequestTimeoutContext);
  const [slow, setSlow] = useState(false);
  useEffect(() => {
    const t = setTimeout(() => setSlow(true), 2000);
    return () => clearTimeout(t);
  }, []);
  return (
    <p className="loading" role="status">
      Loading {what}…
      {slow ? (
        <span className="sub" data-loading-slow>
          Waiting for the server: when Incus or MAAS does not answer, it answers without them after its request timeout ({seconds(timeout)}).
        </span>
      ) : null}
    </p>
  );
}

export function Time({ at }: { at: string | null | undefined }) {
  if (!at) return <span>—</span>;
  const d = new Date(at);
  return (
    <time dateTime={at} title={d.toISOString()}>
      {timeText(d)}
    </time>
  );
}
