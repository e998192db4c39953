// A modal dialog on the native <dialog> element: the page behind is inert, focus stays
// inside, Escape closes it and focus returns to what opened it.
import { useEffect, useId, useRef, type ReactNode } from 'react';

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
