// Time in a harness run: the workflows' one interval, real-time pauses, and
// durations and clock times as the reports print them.

export const INTERVAL_MINUTES = 1;
export const INTERVAL_MS = INTERVAL_MINUTES * 60_000;

export const sleepReal = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Milliseconds as seconds with one decimal: `1.5 s`. */
export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

export const iso = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
