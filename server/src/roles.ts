/** Every role orloj knows, and the ones this build can run. */
export const ALL_ROLES = ['api', 'scheduler', 'runners', 'log-ingest', 'notifier'] as const;
export type Role = (typeof ALL_ROLES)[number];

/** Roles implemented so far; the others are refused with a clear message instead of pretending to run. */
export const AVAILABLE_ROLES: readonly Role[] = ['api', 'scheduler', 'runners', 'log-ingest', 'notifier'];

export function parseRoles(text: string): Role[] {
  const names = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 0 || names.includes('all')) return [...AVAILABLE_ROLES];
  const roles: Role[] = [];
  for (const name of names) {
    if (!(ALL_ROLES as readonly string[]).includes(name)) {
      throw new Error(`unknown role "${name}"; roles are ${ALL_ROLES.join(', ')} or all`);
    }
    if (!AVAILABLE_ROLES.includes(name as Role)) {
      throw new Error(`the ${name} role is not available in this version of orloj yet`);
    }
    if (!roles.includes(name as Role)) roles.push(name as Role);
  }
  return roles;
}
