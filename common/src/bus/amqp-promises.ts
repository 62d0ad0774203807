/** Small promise helpers of the AMQP adapter: amqplib's callbacks and closes as promises, and deadlines. */

export function confirmed(send: (done: (err: unknown) => void) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    send((err) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve()));
  });
}

export function beforeDeadline<T>(work: Promise<T>, deadline: number, error: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(error()), Math.max(0, deadline - Date.now()));
  });
  work.catch(() => {}); // settles after the deadline: nobody is listening any more
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

export async function quietly(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch {
    // already closed
  }
}
