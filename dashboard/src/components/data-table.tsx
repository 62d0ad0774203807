import type { ReactNode } from 'react';

export interface Column<T> {
  header: string;
  cell: (row: T) => ReactNode;
}

/**
 * A list as a table on wide screens and as stacked cards on narrow ones
 * (each cell then shows its column's header, from data-label).
 */
export function DataTable<T>({
  label,
  rows,
  rowKey,
  columns,
  rowClass,
}: {
  label: string;
  rows: readonly T[];
  rowKey: (row: T) => string;
  columns: readonly Column<T>[];
  /** An optional class per row (e.g. its state, for compact styling). */
  rowClass?: (row: T) => string;
}) {
  return (
    <table className="table stack" aria-label={label}>
      <thead>
        <tr>
          {columns.map((c) => (
            <th key={c.header} scope="col">
              {c.header}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={rowKey(row)} className={rowClass?.(row) || undefined}>
            {columns.map((c) => (
              <td key={c.header} data-label={c.header}>
                {c.cell(row)}
              </td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}
