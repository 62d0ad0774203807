/**
 * A horizontal bar chart as plain SVG: one bar per item, its value written
 * next to it (so the numbers are readable without the bars, and by screen
 * readers through the table role).
 */
export function BarChart({ title, items, format = String }: { title: string; items: { label: string; value: number }[]; format?: (n: number) => string }) {
  const max = Math.max(1, ...items.map((i) => i.value));
  const row = 28;
  const labelWidth = 38; // percent of the width for labels
  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      {items.length === 0 ? (
        <p className="muted">Nothing yet.</p>
      ) : (
        <svg role="img" aria-label={`${title}: ${items.map((i) => `${i.label} ${format(i.value)}`).join(', ')}`} width="100%" height={items.length * row} className="chart-svg">
          {items.map((item, i) => {
            const width = (item.value / max) * (100 - labelWidth - 14);
            return (
              <g key={`${item.label}-${i}`} transform={`translate(0, ${i * row})`}>
                <text x="0" y={row / 2 + 5} className="chart-label">
                  {item.label.length > 28 ? `${item.label.slice(0, 27)}…` : item.label}
                </text>
                <rect x={`${labelWidth}%`} y="5" height={row - 10} width={`${Math.max(width, item.value > 0 ? 0.5 : 0)}%`} rx="3" className="chart-bar" />
                <text x={`${labelWidth + width + 1}%`} y={row / 2 + 5} className="chart-value">
                  {format(item.value)}
                </text>
              </g>
            );
          })}
        </svg>
      )}
    </figure>
  );
}
