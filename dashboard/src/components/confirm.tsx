import { useEffect, useRef, useState } from 'react';

/**
 * A button that asks first: the question and the two answers appear in
 * place (focus moves to them, Escape cancels), so a destructive action is
 * never one stray click away.
 */
export function ConfirmButton({
  label,
  question,
  confirmLabel,
  onConfirm,
  disabled,
  danger,
}: {
  label: string;
  question: string;
  confirmLabel: string;
  onConfirm: () => void;
  disabled?: boolean;
  danger?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) cancel.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" className={danger ? 'danger' : 'secondary'} disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <div className="confirm" role="alertdialog" aria-label={question} onKeyDown={(e) => e.key === 'Escape' && setAsking(false)}>
      <span>{question}</span>
      <button
        type="button"
        className={danger ? 'danger' : ''}
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" className="secondary" ref={cancel} onClick={() => setAsking(false)}>
        Cancel
      </button>
    </div>
  );
}
