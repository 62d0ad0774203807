// @orloj/common/config: every setting declared once (settings.ts), the validated environment
// built from them (config.ts) and DATA_DIR's permissions.
export * from './config.js';
export * from './settings.js';
export type { Setting, SettingValue } from './setting-kinds.js';
export * from './data-dir.js';
