export { createApp, API_PREFIX, type AppOptions } from './app.js';
export { ApiServer } from './server.js';
export { openApiDocument } from './openapi.js';
