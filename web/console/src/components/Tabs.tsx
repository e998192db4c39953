// Tabs in the WAI-ARIA tabs pattern: one tab stop for the tab list, the arrow keys (and
// Home, End) move between tabs and show each at once, and the panel follows in Tab order.
import { useId, useRef, type KeyboardEvent, type ReactNode } from 'react';

export interface TabDef<T extends string> {
  id: T;
  label: string;
}

export function Tabs<T extends string>({ label, tabs, current, onSelect, children }: { label: string; tabs: readonly TabDef<T>[]; current: T; onSelect(t: T): void; children: ReactNode }) {
  const base = useId();
  const list = useRef<HTMLDivElement>(null);
  const tabId = (t: T) => `${base}-tab-${t}`;
  const onKey = (e: KeyboardEvent<HTMLDivElement>) => {
    const i = tabs.findIndex((t) => t.id === current);
    const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    const next = tabs[(to + tabs.length) % tabs.length].id;
    onSelect(next);
    list.current?.querySelector<HTMLElement>(`[id="${tabId(next)}"]`)?.focus();
  };
  return (
    <>
      <div className="tabs" role="tablist" aria-label={label} ref={list} onKeyDown={onKey}>
        {tabs.map((t) => (
          <button
            key={t.id}
            type="button"
            role="tab"
            className="tab"
            id={tabId(t.id)}
            aria-selected={t.id === current}
            aria-controls={`${base}-panel`}
            tabIndex={t.id === current ? 0 : -1}
            onClick={() => onSelect(t.id)}
            data-tab={t.id}
          >
            {t.label}
          </button>
        ))}
      </div>
      <div className="tab-panel" role="tabpanel" id={`${base}-panel`} aria-labelledby={tabId(current)} tabIndex={0} data-tab-panel={current}>
        {children}
      </div>
    </>
  );
}
