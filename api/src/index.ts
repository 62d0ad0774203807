export { createApp, API_PREFIX, type AppOptions } from './app.js';
export { ApiServer } from './server.js';
export { openApiDocument } from './openapi.js';
export { LiveTailHub, DEFAULT_LIVE_TAIL, type LiveTailSettings } from './http/live-tail.js';
export { isDashboardDir, DASHBOARD_CSP } from './http/dashboard.js';
export { INVITATION_MAX_MS, insertAccount, mintInvitation, newAccount } from './http/accounts.js';
