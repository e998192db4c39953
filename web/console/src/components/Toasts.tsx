// Toasts: after each change, a short note that it succeeded or failed, with a link to its
// audit event. They are announced (aria-live) but never take focus, stay while focused
// (keyboard users reach the link) and can be dismissed; they do not wait for the pointer, so
// one never stays over the page's own controls; the event is found in the audit trail (the mutations'
// payloads do not name it) as the caller's newest event of that action.
import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { useAuditReads } from '../hooks/audit';
import { useViewer } from '../viewer';
import { Link } from '../router';

export interface ToastInput {
  ok: boolean;
  title: string;
  detail?: string;
  // action is the mutation's field name, as the audit trail records it.
  action?: string;
  machine?: string;
}

interface Toast extends ToastInput {
  id: number;
  event?: string | null; // undefined: still looking; null: not found
  actor?: string;
}

type Notify = (t: ToastInput) => void;
const ToastContext = createContext<Notify>(() => {});

export function useToast(): Notify {
  return useContext(ToastContext);
}

// How long a toast stays unless focused; the audit trail keeps its event for good.
const lifetime = 10000;

export function ToastHost({ children }: { children: ReactNode }) {
  const [toasts, setToasts] = useState<Toast[]>([]);
  const reads = useAuditReads();
  const viewer = useViewer();
  const actor = useRef(viewer?.name);
  actor.current = viewer?.name;
  const next = useRef(1);
  const dismiss = useCallback((id: number) => setToasts((ts) => ts.filter((t) => t.id !== id)), []);
  const notify = useCallback<Notify>(
    (input) => {
      const id = next.current++;
      setToasts((ts) => [...ts.slice(-3), { ...input, id }]);
      if (!input.action) return;
      reads
        .events({ machine: null, actor: actor.current ?? null, outcome: null }, 10, null)
        .then((res) => {
          const ev = res.data?.auditEvents.edges.map((e) => e.node).find((e) => e.action === input.action && e.outcome !== 'PLANNED');
          setToasts((ts) => ts.map((t) => (t.id === id ? { ...t, event: ev?.id ?? null, actor: actor.current } : t)));
        });
    },
    [reads],
  );
  return (
    <ToastContext.Provider value={notify}>
      {children}
      <section className="toasts" aria-label="Notifications">
        <div aria-live="polite" aria-relevant="additions text">
          {toasts.map((t) => (
            <ToastView key={t.id} toast={t} onDismiss={dismiss} />
          ))}
        </div>
      </section>
    </ToastContext.Provider>
  );
}

function ToastView({ toast: t, onDismiss }: { toast: Toast; onDismiss(id: number): void }) {
  const [held, setHeld] = useState(false);
  useEffect(() => {
    if (held) return;
    const timer = setTimeout(() => onDismiss(t.id), lifetime);
    return () => clearTimeout(timer);
  }, [held, t.id, onDismiss]);
  const audit = useMemo(() => {
    const p = new URLSearchParams();
    if (t.actor) p.set('actor', t.actor);
    if (t.event) p.set('event', t.event);
    return '/audit' + (p.toString() ? '?' + p.toString() : '');
  }, [t.actor, t.event]);
  return (
    <div
      className={`toast tone-${t.ok ? 'positive' : 'negative'}`}
      data-toast={t.ok ? 'success' : 'failure'}
      data-audit-event={t.event ?? undefined}
      onFocus={() => setHeld(true)}
      onBlur={() => setHeld(false)}
    >
      <span className="toast-symbol" aria-hidden="true">{t.ok ? '✓' : '✕'}</span>
      <div className="toast-body">
        <strong>{t.title}</strong>
        {t.detail ? <div>{t.detail}</div> : null}
        {t.action ? (
          <Link to={audit} className="toast-link">
            {t.event ? `Audit event ${t.event}` : t.event === null ? 'Audit trail' : 'Audit event…'}
          </Link>
        ) : null}
      </div>
      <button type="button" className="toast-close" aria-label={`Dismiss: ${t.title}`} onClick={() => onDismiss(t.id)}>
        <span aria-hidden="true">×</span>
      </button>
    </div>
  );
}
