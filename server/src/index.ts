export { startOrloj, migrate, migrationStatus, type RunningOrloj } from './main.js';
export { backup } from './backup.js';
export { ALL_ROLES, AVAILABLE_ROLES, parseRoles, type Role } from './roles.js';
