import type { InputHTMLAttributes, ReactNode, SelectHTMLAttributes, TextareaHTMLAttributes } from 'react';

interface FieldProps {
  id: string;
  label: string;
  error?: string | undefined;
  hint?: ReactNode;
}

/** aria wiring shared by every control: the hint and the error describe it. */
function described({ id, error, hint }: FieldProps) {
  const ids = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ');
  return { id, 'aria-invalid': error ? true : undefined, 'aria-describedby': ids || undefined };
}

/** The hint under a control and its error, with the ids the control's aria-describedby names. */
function Help({ id, error, hint }: Omit<FieldProps, 'label'>) {
  return (
    <>
      {hint ? (
        <p className="hint" id={`${id}-hint`}>
          {hint}
        </p>
      ) : null}
      {error ? (
        <p className="field-error" id={`${id}-error`}>
          {error}
        </p>
      ) : null}
    </>
  );
}

function Frame({ id, label, error, hint, children }: FieldProps & { children: ReactNode }) {
  return (
    <div className={`field${error ? ' field-invalid' : ''}`}>
      <label htmlFor={id}>{label}</label>
      {children}
      <Help id={id} error={error} hint={hint} />
    </div>
  );
}

type Omitted = 'id' | 'onChange' | 'value';

export function TextField(props: FieldProps & Omit<InputHTMLAttributes<HTMLInputElement>, Omitted> & { value: string; onChange: (v: string) => void }) {
  const { id, label, error, hint, value, onChange, ...rest } = props;
  return (
    <Frame id={id} label={label} error={error} hint={hint}>
      <input {...rest} {...described(props)} value={value} onChange={(e) => onChange(e.target.value)} />
    </Frame>
  );
}

export function TextAreaField(
  props: FieldProps & Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, Omitted> & { value: string; onChange: (v: string) => void },
) {
  const { id, label, error, hint, value, onChange, ...rest } = props;
  return (
    <Frame id={id} label={label} error={error} hint={hint}>
      <textarea {...rest} {...described(props)} value={value} onChange={(e) => onChange(e.target.value)} />
    </Frame>
  );
}

export function SelectField(
  props: FieldProps &
    Omit<SelectHTMLAttributes<HTMLSelectElement>, Omitted> & { value: string; onChange: (v: string) => void; options: readonly (string | [string, string])[] },
) {
  const { id, label, error, hint, value, onChange, options, ...rest } = props;
  return (
    <Frame id={id} label={label} error={error} hint={hint}>
      <select {...rest} {...described(props)} value={value} onChange={(e) => onChange(e.target.value)}>
        {options.map((o) => {
          const [v, text] = typeof o === 'string' ? [o, o] : o;
          return (
            <option key={v} value={v}>
              {text}
            </option>
          );
        })}
      </select>
    </Frame>
  );
}

export function CheckboxField(props: FieldProps & { checked: boolean; onChange: (v: boolean) => void; disabled?: boolean }) {
  const { id, label, error, hint, checked, onChange, disabled } = props;
  return (
    <div className={`field field-check${error ? ' field-invalid' : ''}`}>
      <input type="checkbox" {...described(props)} checked={checked} disabled={disabled} onChange={(e) => onChange(e.target.checked)} />
      <label htmlFor={id}>{label}</label>
      <Help id={id} error={error} hint={hint} />
    </div>
  );
}

/** Errors the form has no field for, listed above the buttons. */
export function FormErrors({ errors }: { errors: string[] }) {
  if (errors.length === 0) return null;
  return (
    <div className="form-errors" role="alert">
      {errors.length === 1 ? <p>{errors[0]}</p> : <ul>{errors.map((e) => <li key={e}>{e}</li>)}</ul>}
    </div>
  );
}
