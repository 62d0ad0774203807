// Writes docs/operations.md's settings table from the declarations in
// common/src/config/settings.ts (ADR 0018); common/test/settings.test.ts fails
// while the two differ.
//
//   node --import tsx --conditions=orloj-src scripts/settings-table.ts
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { settingsTable } from '@orloj/common/config';

const file = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docs/operations.md');
const BEGIN = '<!-- settings:begin (generated from common/src/config/settings.ts by scripts/settings-table.ts) -->';
const END = '<!-- settings:end -->';
const text = fs.readFileSync(file, 'utf8');
const from = text.indexOf(BEGIN);
const to = text.indexOf(END);
if (from < 0 || to < from) throw new Error(`docs/operations.md has no ${BEGIN} … ${END} section`);
fs.writeFileSync(file, `${text.slice(0, from + BEGIN.length)}\n${settingsTable()}\n${text.slice(to)}`);
console.log('docs/operations.md: settings table written');
