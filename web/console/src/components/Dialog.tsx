// A modal dialog on the native <dialog> element: the page behind is inert, Tab and
// Shift+Tab cycle inside it (a modal <dialog> alone lets focus leave for the browser's
// own controls after its last element), Escape closes it and focus returns to what opened
// it.
import { useEffect, useId, useRef, type KeyboardEvent, type ReactNode } from 'react';

const focusable = 'a[href], button, input, select, textarea, [tabindex]:not([tabindex="-1"])';

// keepFocusInside wraps Tab from the last focusable element to the first, and Shift+Tab
// from the first to the last.
function keepFocusInside(e: KeyboardEvent<HTMLDialogElement>) {
  if (e.key !== 'Tab') return;
  const all = [...e.currentTarget.querySelectorAll<HTMLElement>(focusable)].filter((el) => !el.matches(':disabled') && el.getClientRects().length > 0);
  if (all.length === 0) return;
  const first = all[0];
  const last = all[all.length - 1];
  const at = document.activeElement;
  if (e.shiftKey && (at === first || !e.currentTarget.contains(at))) {
    e.preventDefault();
    last.focus();
  } else if (!e.shiftKey && (at === last || !e.currentTarget.contains(at))) {
    e.preventDefault();
    first.focus();
  }
}

export interface DialogProps {
  title: string;
  onClose(): void;
  children: ReactNode;
  wide?: boolean;
  // initialFocus selects the element focused on open (default: the first field or button).
  initialFocus?: string;
}

export function Dialog({ title, onClose, children, wide, initialFocus }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const opener = useRef<Element | null>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    opener.current = document.activeElement;
    if (!d.open) d.showModal();
    const first = (initialFocus && d.querySelector<HTMLElement>(initialFocus)) ||
      d.querySelector<HTMLElement>('input:not([disabled]), select, textarea, button[data-autofocus], .dialog-actions button');
    first?.focus();
    return () => {
      if (d.open) d.close();
      if (opener.current instanceof HTMLElement && opener.current.isConnected) opener.current.focus();
    };
  }, [initialFocus]);
  return (
    <dialog
      ref={ref}
      className={wide ? 'dialog dialog-wide' : 'dialog'}
      aria-labelledby={titleId}
      onKeyDown={keepFocusInside}
      onCancel={(e) => {
        e.preventDefault();
        onClose();
      }}
    >
      <h2 id={titleId} className="dialog-title">{title}</h2>
      {children}
    </dialog>
  );
}
