import type { Workflow } from '../api/client';
import { Facts } from './facts';
import { valuesFromWorkflow } from './workflow-payload';

const orNone = (s: string, none = '—') => (s.trim() === '' ? none : s);
const names = (text: string, sep: string) =>
  text
    .split('\n')
    .map((l) => l.split(sep)[0]!.trim())
    .filter(Boolean)
    .join(', ');

/** The request (HTTP check) or the container a workflow runs, in one line, for the page's header. */
export function targetOf(w: Workflow): string {
  const v = valuesFromWorkflow(w);
  return w.kind === 'HEARTBEAT' ? `${v.method} ${v.endpoint}` : v.image;
}

/** The payload as the form's fields read it, instead of raw JSON; header and variable values are not repeated (only their names). */
export function DefinitionSummary({ w }: { w: Workflow }) {
  const v = valuesFromWorkflow(w);
  const items: [string, string][] =
    w.kind === 'HEARTBEAT'
      ? [
          ['Method', v.method],
          ['Endpoint URL', v.endpoint],
          ['Expected status', orNone(v.expectedStatus, '200')],
          ['Timeout', orNone(v.timeout, 'default')],
          ['Headers', orNone(names(v.headers, ':'), 'none')],
          ['Body contains', orNone(v.bodyContains, 'not checked')],
          ...(v.method === 'POST' ? ([['Request body', orNone(v.body, 'empty')]] as [string, string][]) : []),
        ]
      : [
          ['Image', v.image],
          ['Command', orNone(v.cmd.split('\n').join(' '), "the image's default")],
          ['Timeout', orNone(v.timeout, 'default')],
          ['Environment', orNone(names(v.env, '='), 'none')],
          ['Memory', v.memoryMb ? `${v.memoryMb} MB` : 'default'],
          ['CPUs', orNone(v.cpus, 'default')],
          ['Network', v.network],
        ];
  return <Facts label="Definition" className="details definition" items={items.map(([k, val]) => [k, <span className="break">{val}</span>, k === 'Endpoint URL' || k === 'Image'] as const)} />;
}
