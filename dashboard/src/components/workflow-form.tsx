import { useLayoutEffect, useRef, useState, type FocusEvent, type FormEvent } from 'react';
import { WORKFLOW_KINDS } from '../api/client';
import { CheckboxField, FormErrors, SelectField, TextAreaField, TextField } from './fields';
import { ScheduleFields } from './schedule-fields';
import { useFormErrors } from './use-form-errors';
import { buildRequest, emptyValues, formFieldOf, type FormField, type WorkflowFormValues, type WorkflowRequest } from './workflow-payload';
import { checkWorkflowValues } from './workflow-rules';

interface Props {
  mode: 'create' | 'edit';
  initial?: WorkflowFormValues;
  /** Sends the request; throws the api's error, whose field errors are shown at their fields. */
  onSubmit: (request: WorkflowRequest) => Promise<void>;
  onCancel: () => void;
}

/** Create or edit a workflow: common fields, then the fields of its kind. */
export function WorkflowForm({ mode, initial, onSubmit, onCancel }: Props) {
  const { v, setV, busy, errors, err, form, field, submit } = useWorkflowForm(initial, onSubmit);
  const heartbeat = v.kind === 'HEARTBEAT';
  return (
    <form ref={form} className="card form" onSubmit={(e) => void submit(e)} noValidate aria-label={mode === 'create' ? 'New workflow' : 'Edit workflow'}>
      <CommonFields mode={mode} v={v} setV={setV} field={field} />
      <ScheduleFields v={v} field={field} />

      {heartbeat ? <HeartbeatFields v={v} field={field} /> : <ContainerFields v={v} setV={setV} field={field} err={err} />}
      <FormErrors errors={errors.general} />
      <div className="row">
        <button type="submit" disabled={busy}>
          {busy ? 'Saving…' : mode === 'create' ? 'Create workflow' : 'Save changes'}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/**
 * The form's state: values, which fields are checked as you type, the api's
 * field errors (hidden once the field is edited) and the submit.
 */
function useWorkflowForm(initial: WorkflowFormValues | undefined, onSubmit: Props['onSubmit']) {
  const [v, setV] = useState<WorkflowFormValues>(() => initial ?? emptyValues());
  const [busy, setBusy] = useState(false);
  const errors = useFormErrors(formFieldOf);
  const [local, setLocal] = useState<Partial<Record<FormField, string>>>({});
  // Checked as you type: a field once left (or after a submit), every field in one pass.
  const [touched, setTouched] = useState<ReadonlySet<FormField>>(new Set());
  const [submitted, setSubmitted] = useState(false);
  // Fields changed since the api last answered: its message there is stale.
  const [edited, setEdited] = useState<ReadonlySet<FormField>>(new Set());
  const live = checkWorkflowValues(v);
  const checked = (f: FormField) => submitted || touched.has(f);
  const err = (f: FormField) => (checked(f) ? live[f] : undefined) ?? (edited.has(f) ? undefined : (local[f] ?? errors.fields[f]));
  const form = useRef<HTMLFormElement>(null);
  // After a refused submit the first field in error takes the focus, so keyboard and screen reader users land on it.
  // A layout effect: in the same commit that marks the fields, not after the next paint (the focus never lags the marks).
  useLayoutEffect(() => {
    form.current?.querySelector<HTMLElement>('[aria-invalid="true"]')?.focus();
  }, [errors.fields, local]);
  const field = <K extends FormField>(key: K) => ({
    id: `wf-${key}`,
    error: err(key),
    value: v[key] as string,
    onChange: (value: string) => {
      setV((old) => ({ ...old, [key]: value }));
      setEdited((old) => (old.has(key) ? old : new Set(old).add(key)));
    },
    // Leaving a field for the submit button: the submit checks every field, and a message appearing now would move the button from under the pointer.
    onBlur: (e: FocusEvent<HTMLElement>) => {
      if ((e.relatedTarget as HTMLElement | null)?.getAttribute('type') === 'submit') return;
      setTouched((old) => (old.has(key) ? old : new Set(old).add(key)));
    },
  });

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    errors.clear();
    setSubmitted(true);
    setEdited(new Set());
    const built = buildRequest(v);
    const problems = { ...checkWorkflowValues(v), ...(built.ok ? {} : built.errors) };
    if (!built.ok || Object.keys(problems).length > 0) {
      setLocal(problems);
      return;
    }
    setLocal({});
    setBusy(true);
    try {
      await onSubmit(built.request);
    } catch (error) {
      errors.show(error);
    } finally {
      setBusy(false);
    }
  };

  return { v, setV, busy, errors, err, form, field, submit };
}

type FormState = ReturnType<typeof useWorkflowForm>;
type SetValues = FormState['setV'];
type FieldOf = FormState['field'];

/** Name, kind (fixed once created) and failure limit. */
function CommonFields({ mode, v, setV, field }: { mode: Props['mode']; v: WorkflowFormValues; setV: SetValues; field: FieldOf }) {
  return (
    <fieldset>
      <legend>Workflow</legend>
      <TextField {...field('name')} label="Name" required maxLength={200} autoComplete="off" />
      {mode === 'create' ? (
        <SelectField
          {...field('kind')}
          label="Kind"
          options={WORKFLOW_KINDS.map((k) => [k, k === 'HEARTBEAT' ? 'HEARTBEAT — an HTTP check' : 'CONTAINER — a container run'] as [string, string])}
          onChange={(kind) => setV((old) => ({ ...old, kind: kind as WorkflowFormValues['kind'] }))}
        />
      ) : (
        <p className="static-field">
          <span className="label">Kind</span> {v.kind}
        </p>
      )}
      <TextField
        {...field('maxFailures')}
        label="Failures before terminating"
        type="number"
        inputMode="numeric"
        min={3}
        max={100}
        required
        hint="Consecutive failed jobs, 3 to 100."
      />
    </fieldset>
  );
}

/** A HEARTBEAT's HTTP check. */
function HeartbeatFields({ v, field }: { v: WorkflowFormValues; field: FieldOf }) {
  return (
    <fieldset>
      <legend>HTTP check</legend>
      <TextField {...field('endpoint')} label="Endpoint URL" type="url" inputMode="url" placeholder="https://example.com/health" required />
      <div className="grid-2">
        <SelectField {...field('method')} label="Method" options={['GET', 'HEAD', 'POST']} />
        <TextField {...field('expectedStatus')} label="Expected status code" type="number" inputMode="numeric" min={100} max={599} hint="200 when left empty." />
      </div>
      <TextAreaField {...field('headers')} label="Headers" rows={3} placeholder="Authorization: Bearer …" hint="One per line, as Name: value." spellCheck={false} />
      {v.method === 'POST' ? <TextAreaField {...field('body')} label="Request body" rows={3} spellCheck={false} /> : null}
      <div className="grid-2">
        <TextField {...field('timeout')} label="Timeout" placeholder="10s" hint="Such as 10s or 1m30s; at most 5m." />
        <TextField {...field('bodyContains')} label="Response must contain" hint="Optional text the body must include." />
      </div>
    </fieldset>
  );
}

/** A CONTAINER's image, command, environment, limits and log retention. */
function ContainerFields({ v, setV, field, err }: { v: WorkflowFormValues; setV: SetValues; field: FieldOf; err: FormState['err'] }) {
  return (
    <fieldset>
      <legend>Container</legend>
      <TextField {...field('image')} label="Image" placeholder="alpine:3.20" required spellCheck={false} autoComplete="off" />
      <TextAreaField {...field('cmd')} label="Command" rows={3} placeholder={'sh\n-c\necho hello'} hint="One argument per line; empty runs the image's default." spellCheck={false} />
      <TextAreaField {...field('env')} label="Environment" rows={3} placeholder="GREETING=hello" hint="One per line, as KEY=value." spellCheck={false} />
      <div className="grid-2">
        <TextField {...field('timeout')} label="Timeout" placeholder="30s" hint="Such as 30s or 10m; at most 1h." />
        <SelectField {...field('network')} label="Network" options={[['none', 'none (no network)'], ['bridge', 'bridge']]} />
      </div>
      <div className="grid-2">
        <TextField {...field('memoryMb')} label="Memory limit (MB)" type="number" inputMode="numeric" min={6} hint="Optional." />
        <TextField {...field('cpus')} label="CPU limit" type="number" inputMode="decimal" step="0.1" min={0} hint="Optional, such as 0.5." />
      </div>
      <CheckboxField
        id="wf-logRetention"
        label="Keep logs"
        hint="Store the container's output so it can be read, searched and downloaded."
        checked={v.logRetention}
        error={err('logRetention')}
        onChange={(logRetention) => setV((old) => ({ ...old, logRetention }))}
      />
    </fieldset>
  );
}
