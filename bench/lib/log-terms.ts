// The search terms of the seeded job logs (bench/lib/seed.ts writes the lines;
// the log-search suite, which must not import @orloj/common, searches them).

/** In 5 lines of every seeded job (the needle of the rare search). */
export const RARE_TERM = 'Needle-7F3A';
/** In every 10th line of a seeded job (several on every page of 100). */
export const COMMON_TERM = 'timeout';
/** In no line of any seeded job (the needle of the absent search: the skip index rules out every block). */
export const ABSENT_TERM = 'zzqxj-absent';
