import type { Health } from './health';
import { formatAbsolute } from '../relative-time';

type Run = Health['recent_runs'][number];

const WIDTH = 600;
const HEIGHT = 160;
const PAD = { left: 48, right: 12, top: 12, bottom: 22 };

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : Math.round((s[mid - 1]! + s[mid]!) / 2);
}

/**
 * Response times of a HEARTBEAT workflow's latest checks as a line over time
 * (oldest left), failed checks as red squares at their own time. Plain SVG;
 * the figure's name gives the numbers to screen readers, each point its own
 * in a tooltip.
 */
export function ResponseTimeChart({ runs }: { runs: readonly Run[] }) {
  const points = [...runs].reverse().filter((r): r is Run & { check: NonNullable<Run['check']> } => r.check !== undefined);
  if (points.length === 0) {
    return (
      <figure className="chart response-chart">
        <figcaption>Response time</figcaption>
        <p className="muted">No checks recorded yet.</p>
      </figure>
    );
  }
  const times = points.map((p) => p.check.response_time_ms);
  const max = Math.max(10, ...times);
  const failed = points.filter((p) => p.status === 'FAILED').length;
  const summary = `Response time of the last ${points.length} checks: median ${median(times)} ms, slowest ${Math.max(...times)} ms, fastest ${Math.min(...times)} ms; ${failed} failed.`;
  const x = (i: number) => PAD.left + (points.length === 1 ? (WIDTH - PAD.left - PAD.right) / 2 : (i / (points.length - 1)) * (WIDTH - PAD.left - PAD.right));
  const y = (ms: number) => PAD.top + (1 - ms / max) * (HEIGHT - PAD.top - PAD.bottom);
  const line = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${x(i).toFixed(1)},${y(p.check.response_time_ms).toFixed(1)}`).join(' ');
  const label = (p: (typeof points)[number]) =>
    `${formatAbsolute(p.completed_at ?? p.scheduled_at)}: ${p.check.response_time_ms} ms${p.check.status_code !== undefined ? `, HTTP ${p.check.status_code}` : ''}${p.check.failure ? `, failed (${p.check.failure})` : ''}`;
  return (
    <figure className="chart response-chart">
      <figcaption>Response time (ms), last {points.length} checks</figcaption>
      <svg role="img" aria-label={summary} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} width="100%" className="chart-svg">
        {[0, 0.5, 1].map((f) => (
          <g key={f}>
            <line x1={PAD.left} x2={WIDTH - PAD.right} y1={y(max * f)} y2={y(max * f)} className="chart-grid" />
            <text x={PAD.left - 6} y={y(max * f) + 4} className="chart-axis" textAnchor="end">
              {Math.round(max * f)}
            </text>
          </g>
        ))}
        <path d={line} className="chart-line" fill="none" />
        {points.map((p, i) =>
          p.status === 'FAILED' ? (
            <rect key={p.job_id} x={x(i) - 4} y={y(p.check.response_time_ms) - 4} width="8" height="8" className="chart-point-bad">
              <title>{label(p)}</title>
            </rect>
          ) : (
            <circle key={p.job_id} cx={x(i)} cy={y(p.check.response_time_ms)} r="3.5" className="chart-point">
              <title>{label(p)}</title>
            </circle>
          ),
        )}
      </svg>
      <p className="chart-note muted small">{summary}</p>
    </figure>
  );
}
