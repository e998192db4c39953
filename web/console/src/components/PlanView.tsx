// PlanView shows a dry run's plan: what it read (when asked: showFacts), the calls in
// order, then what would refuse or qualify it.
import type { Plan } from '../lib/plan';
import { changeText } from '../lib/plan';
import { codeLabel } from '../lib/errors';

export function PlanView({ plan, planning, problem, showFacts }: { plan: Plan | null; planning: boolean; problem?: string; showFacts?: boolean }) {
  return (
    <section className="plan" data-plan aria-live="polite" aria-busy={planning || undefined}>
      <h3>What it will do</h3>
      {planning && !plan ? <p className="hint">Asking the server for the plan…</p> : null}
      {problem ? <p className="hint" data-plan-problem>No plan: {problem}</p> : null}
      {plan ? (
        <>
          {showFacts && plan.facts?.length ? (
            <dl className="plan-facts">
              {plan.facts.map((f, i) => (
                <div key={i} data-plan-fact>
                  <dt>{f.name}</dt>
                  <dd>
                    <code>{f.value}</code>
                  </dd>
                </div>
              ))}
            </dl>
          ) : null}
          {plan.calls.length ? (
            <ol className="plan-calls">
              {plan.calls.map((call, i) => (
                <li key={i} data-plan-call>
                  <span className="plan-system">{call.system}</span> <code>{call.request}</code>
                  {call.target ? <> on <strong>{call.target}</strong></> : null}
                  {call.changes.length ? (
                    <ul>
                      {call.changes.map((c, j) => (
                        <li key={j}>
                          <code>{changeText(c)}</code>
                        </li>
                      ))}
                    </ul>
                  ) : null}
                </li>
              ))}
            </ol>
          ) : (
            <p className="hint">No call: nothing would be changed.</p>
          )}
          {plan.refusals.map((r, i) => (
            <p key={`r${i}`} className="plan-refusal" data-plan-refusal>
              <span aria-hidden="true">✕ </span>
              {r.message}
              {r.code ? <span className="code"> — {codeLabel(r.code)}</span> : null}
            </p>
          ))}
          {plan.warnings.map((w, i) => (
            <p key={`w${i}`} className="plan-warning" data-plan-warning>
              <span aria-hidden="true">! </span>
              {w.message}
            </p>
          ))}
        </>
      ) : null}
    </section>
  );
}
