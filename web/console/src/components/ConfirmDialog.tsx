// Every change goes through this dialog: it names the machine and says what will happen,
// asks the server for the plan (the mutation with dryRun: true) and shows it, optionally
// asks for the machine's name to be typed, runs the mutation, and shows what the server
// said (field errors beside their fields) or closes on success; either way a toast says
// how it ended, with its audit event. A plan that would be
// refused disables the button, with the refusal as the reason.
//
// Fields are checked by the server's own rules as the operator types: the plan asked for
// the inputs as they are names the field at fault (INVALID_INPUT's extensions.field), and
// that message goes beside the field, disables the button, and goes as soon as the value
// changes (a plan for other inputs is never shown). Nothing is marked before the
// operator's first input: a dialog opens clean.
import { useEffect, useId, useRef, useState, type ReactNode, type FormEvent } from 'react';
import type { OperationResult } from '@urql/core';
import { Dialog } from './Dialog';
import { Field, Problems } from './ui';
import { fieldProblems, problemsOf, type Problem } from '../lib/errors';
import { planOf, planOutcome, refusalReason, type Plan } from '../lib/plan';
import { PlanView } from './PlanView';
import type { ChangeName } from '../api/changes.gen';
import { useToast } from './Toasts';

export interface ConfirmProps<T> {
  // change is the mutation run sends: a declared change (api/changes.gen.ts, from the
  // schema's @change), whose answer carries the plan the dialog shows.
  change: ChangeName;
  title: string;
  machine: string;
  // consequence says what will happen, in plain words.
  consequence: ReactNode;
  confirmLabel: string;
  danger?: boolean;
  // typeToConfirm is a name the operator must type before the change can be made.
  typeToConfirm?: string;
  typeLabel?: string;
  // blocked is why the change cannot be asked for as filled in (checked before submit, as
  // the server would check it); the button stays focusable and says so.
  blocked?: string;
  wide?: boolean;
  // showFacts lists what the plan read (a registration's fingerprint, members and roles).
  showFacts?: boolean;
  // fields renders extra inputs; errors maps the server's extensions.field to messages.
  fields?: (errors: Map<string, string>) => ReactNode;
  fieldNames?: string[];
  // run sends the mutation; dryRun asks only for its plan. planHash, on the real call, is
  // the hash of the plan the dialog showed: the server refuses (PLAN_CHANGED) when its plan
  // is no longer that one.
  run(dryRun: boolean, planHash?: string | null): Promise<OperationResult<T>>;
  // planKey names what the plan depends on (the inputs as filled in): a new key asks
  // for a new plan, after a short pause in typing.
  planKey?: string;
  // onDone replaces closing on success; it closes the dialog itself if it should.
  onDone?(data: T): void;
  onClose(): void;
}

export function ConfirmDialog<T>(p: ConfirmProps<T>) {
  const [typed, setTyped] = useState('');
  const toast = useToast();
  const blockedId = useId();
  const [busy, setBusy] = useState(false);
  const [problems, setProblems] = useState<Problem[]>([]);
  const [planned, setPlanned] = useState<{ key: string; plan: Plan | null; problems: Problem[] } | null>(null);
  // Inputs the dialog itself finds incomplete (blocked) are not worth a plan: it would be
  // INVALID_INPUT, and an audit event each time.
  const key = p.blocked ? '' : (p.planKey ?? '');
  const wanted = !p.blocked;
  const run = useRef(p.run);
  run.current = p.run;
  useEffect(() => {
    if (!wanted) return;
    let gone = false;
    // The first plan at once; later ones once typing pauses (each plan is audited).
    const timer = setTimeout(
      async () => {
        const res = await run.current(true);
        if (gone) return;
        const found = problemsOf(res.error);
        setPlanned({ key, plan: found.length ? null : planOf(res.data, p.change), problems: found });
      },
      planned ? 500 : 0,
    );
    return () => {
      gone = true;
      clearTimeout(timer);
    };
  }, [key, wanted]);
  // A submit's problems are about the inputs it sent: they go when the inputs change.
  const submitted = useRef(key);
  useEffect(() => {
    if (submitted.current !== key) setProblems([]);
  }, [key]);
  // edited: the operator has changed an input since the dialog opened.
  const opened = useRef(p.planKey ?? '');
  const edited = useRef(false);
  if ((p.planKey ?? '') !== opened.current) edited.current = true;
  const current = planned?.key === key ? planned : null;
  const outcome = planOutcome(current?.problems ?? [], current?.plan ?? null, p.fieldNames ?? []);
  // Before any input nothing is marked, so the reason names the field's problem itself.
  const invalid = outcome.fieldMessage && !edited.current ? `It would be refused: ${outcome.fieldMessage}` : outcome.invalid;
  const blocked = p.blocked ?? (current ? (invalid ?? refusalReason(current.plan)) : 'Waiting for the plan of this change…');
  const planProblem = outcome.problem ?? (outcome.fieldMessage && edited.current ? 'none until the field marked above is corrected.' : undefined);
  const typedOK = !p.typeToConfirm || typed === p.typeToConfirm;
  const ready = typedOK && !blocked;
  const errors = fieldProblems(problems);
  if (edited.current) {
    for (const [k, msg] of outcome.fields) if (!errors.has(k)) errors.set(k, msg);
  }

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!ready || busy) return;
    setBusy(true);
    setProblems([]);
    submitted.current = key;
    const res = await p.run(false, current?.plan?.planHash ?? null);
    setBusy(false);
    const found = problemsOf(res.error);
    const action = mutationField(res);
    if (found.some((f) => f.code === 'PLAN_CHANGED')) {
      // The plan shown went stale: nothing was changed. Show the new plan; the operator
      // confirms again (with its hash) or cancels.
      const again = await p.run(true);
      const stale = problemsOf(again.error);
      setPlanned({ key, plan: stale.length ? null : planOf(again.data, p.change), problems: stale });
      setProblems([{ code: 'PLAN_CHANGED', message: 'The plan changed since it was shown (another change, or the cluster moved on): nothing was changed. Look at the new plan below and confirm again.' }]);
      return;
    }
    if (found.length > 0 || !res.data) {
      setProblems(found.length ? found : [{ message: 'The server returned no answer: reload the page to see what happened.' }]);
      toast({ ok: false, title: `Failed: ${p.title}`, detail: found[0]?.message, action, machine: p.machine });
      return;
    }
    toast({ ok: true, title: `Done: ${p.title}`, action, machine: p.machine });
    // onDone, when given, decides what follows (the approval shows its token next).
    if (p.onDone) p.onDone(res.data);
    else p.onClose();
  };

  return (
    <Dialog title={p.title} onClose={() => !busy && p.onClose()} wide={p.wide}>
      <form onSubmit={submit} noValidate>
        <div className="consequence">{p.consequence}</div>
        {p.fields?.(errors)}
        <PlanView plan={current?.plan ?? null} planning={!current} problem={planProblem} showFacts={p.showFacts} />
        {p.typeToConfirm ? (
          <Field label={p.typeLabel ?? `Type ${p.typeToConfirm} to confirm`}>
            {(a) => (
              <input {...a} className="input" autoComplete="off" spellCheck={false} value={typed} onChange={(e) => setTyped(e.target.value)} data-confirm-name />
            )}
          </Field>
        ) : null}
        <Problems problems={problems} machine={p.machine} shownFields={p.fieldNames} />
        <div className="dialog-actions">
          <button type="button" className="btn btn-plain" onClick={p.onClose} disabled={busy}>
            Cancel
          </button>
          <button
            type="submit"
            className={`btn ${p.danger ? 'btn-danger' : 'btn-primary'}`}
            aria-disabled={!ready || busy ? true : undefined}
            aria-describedby={blocked ? blockedId : undefined}
            data-confirm
            data-planned={current ? 'true' : undefined}
          >
            {busy ? 'Working…' : p.confirmLabel}
          </button>
        </div>
        {!typedOK ? <p className="hint">The button works once the name is typed exactly.</p> : null}
        {typedOK && blocked ? (
          <p className="reason dialog-blocked" id={blockedId} data-blocked>
            {blocked}
          </p>
        ) : null}
      </form>
    </Dialog>
  );
}

// mutationField is the mutation's field (registerMachine, …): the audit trail's action.
function mutationField(res: OperationResult<unknown>): string | undefined {
  for (const d of res.operation.query.definitions) {
    if (d.kind === 'OperationDefinition') {
      const f = d.selectionSet.selections[0];
      if (f?.kind === 'Field') return f.name.value;
    }
  }
  return undefined;
}
