/** Something stopped at shutdown: a role, the ops server, the bus, the store. */
export interface Stoppable {
  stop(): Promise<void>;
}

/**
 * Stops each in turn, whatever the others do: a role whose stop() rejects
 * must not leave the bus connected or the store open (the SQLite file's WAL
 * unmerged, a PostgreSQL pool holding connections). Rejects afterwards with
 * the first failure, so the caller still exits non-zero and can say why.
 */
export async function stopInOrder(steps: readonly Stoppable[], onError: (err: unknown) => void = () => undefined): Promise<void> {
  const failures: unknown[] = [];
  for (const step of steps) {
    try {
      await step.stop();
    } catch (err) {
      failures.push(err);
      onError(err);
    }
  }
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, `${failures.length} parts failed to stop`);
}
