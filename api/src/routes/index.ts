import type { Operation } from '../contract/operation.js';
import { analyticsOperations } from './analytics.routes.js';
import { authOperations } from './auth.routes.js';
import { eventsOperations } from './events.routes.js';
import { incidentsOperations } from './incidents.routes.js';
import { reportsOperations } from './reports.routes.js';
import { jobsOperations } from './jobs.routes.js';
import { logsOperations } from './logs.routes.js';
import { maintenanceWindowsOperations } from './maintenance-windows.routes.js';
import { notificationsOperations } from './notifications.routes.js';
import { schedulesOperations } from './schedules.routes.js';
import { usersOperations } from './users.routes.js';
import { workflowsOperations } from './workflows.routes.js';

/** Every resource's operations, in the order the router tries them. */
export const RESOURCE_OPERATIONS: readonly Operation[] = [
  ...authOperations,
  ...usersOperations,
  ...workflowsOperations,
  ...schedulesOperations,
  ...jobsOperations,
  ...logsOperations,
  ...eventsOperations,
  ...notificationsOperations,
  ...analyticsOperations,
  ...incidentsOperations,
  ...maintenanceWindowsOperations,
  ...reportsOperations,
];
