import { Cron } from 'croner';
import { SelectField, TextField } from './fields';
import type { WorkflowFormValues } from './workflow-payload';
import { timeZoneProblem } from './workflow-rules';

type FieldOf = <K extends keyof WorkflowFormValues>(
  key: K,
) => { id: string; error: string | undefined; value: string; onChange: (value: string) => void; onBlur: (e: React.FocusEvent<HTMLElement>) => void };

const viewerZone = (): string => Intl.DateTimeFormat().resolvedOptions().timeZone;

/**
 * The next `count` runs of a cron expression in a zone, or undefined when the
 * browser cannot read it. A preview: the api computes the real slots (and
 * applies the daylight-saving rule of docs/api.md, "Schedules"), and the
 * workflow's jitter moves each later.
 */
export function nextRuns(expression: string, zone: string, count = 5, from = new Date()): Date[] | undefined {
  if (expression.trim() === '' || timeZoneProblem(zone)) return undefined;
  try {
    return new Cron(expression.trim(), { timezone: zone, legacyMode: true, paused: true }).nextRuns(count, from);
  } catch {
    return undefined;
  }
}

function inZone(d: Date, zone: string): string {
  return d.toLocaleString(undefined, { timeZone: zone, weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' });
}

/** The next five runs in the chosen zone and in the viewer's. */
function Preview({ v }: { v: WorkflowFormValues }) {
  const runs = nextRuns(v.cron, v.timezone);
  const mine = viewerZone();
  return (
    <div className="schedule-preview" aria-live="polite">
      <p className="label" id="wf-preview-title">
        Next runs
      </p>
      {runs && runs.length > 0 ? (
        <table aria-labelledby="wf-preview-title">
          <thead>
            <tr>
              <th scope="col">In {v.timezone}</th>
              {mine !== v.timezone ? <th scope="col">Your time ({mine})</th> : null}
            </tr>
          </thead>
          <tbody>
            {runs.map((d) => (
              <tr key={d.getTime()}>
                <td>{inZone(d, v.timezone)}</td>
                {mine !== v.timezone ? <td>{inZone(d, mine)}</td> : null}
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p className="hint">Shown once the expression and the time zone can be read.</p>
      )}
    </div>
  );
}

/** The run policy's three choices, each with its options in the api's order (its default first): docs/api.md, "Run policy". */
const RUN_POLICY: readonly [key: 'overlapPolicy' | 'catchUpPolicy' | 'firstRun', label: string, options: readonly [string, string][]][] = [
  ['overlapPolicy', 'When a run is still going at the next time', [['run_after', 'Run once right after it'], ['skip', 'Skip that time']]],
  ['catchUpPolicy', 'After orloj was down', [['latest', 'Run the most recent missed time'], ['none', 'Run nothing missed']]],
  ['firstRun', 'First run', [['at_first_slot', 'At the first scheduled time'], ['now', 'Right after it is built']]],
];

/** What becomes of overruns, downtime and the build. */
function RunPolicyFields({ field }: { field: FieldOf }) {
  return (
    <div className="grid-2">
      {RUN_POLICY.map(([key, label, options]) => (
        <SelectField key={key} {...field(key)} label={label} options={options} />
      ))}
    </div>
  );
}

/** Every N minutes, or a cron expression in a time zone; the jitter and the run policy either way. */
export function ScheduleFields({ v, field }: { v: WorkflowFormValues; field: FieldOf }) {
  const byCron = v.scheduleBy === 'cron';
  return (
    <fieldset>
      <legend>Schedule</legend>
      <SelectField
        {...field('scheduleBy')}
        label="Runs"
        options={[
          ['interval', 'Every N minutes'],
          ['cron', 'On a cron schedule'],
        ]}
      />
      {byCron ? (
        <div className="grid-2">
          <TextField {...field('cron')} label="Cron expression" required spellCheck={false} autoComplete="off" placeholder="0 9 * * MON-FRI" hint="Five fields (minute hour day month weekday), or @hourly, @daily, @weekly, @monthly, @yearly." />
          <TextField {...field('timezone')} label="Time zone" required spellCheck={false} autoComplete="off" placeholder="Europe/Berlin" hint="An IANA name; a local time skipped by daylight saving runs when the clock jumps, a repeated one runs once." />
        </div>
      ) : (
        <TextField {...field('interval')} label="Interval (minutes)" type="number" inputMode="numeric" min={1} max={10080} required hint="1 to 10080." />
      )}
      <TextField {...field('jitter')} label="Jitter (seconds)" type="number" inputMode="numeric" min={0} max={3600} hint="0 to 3600: every run moves later by the same offset within it, to spread workflows due together." />
      {byCron ? <Preview v={v} /> : null}
      <RunPolicyFields field={field} />
    </fieldset>
  );
}
