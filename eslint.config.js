import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import reactHooks from 'eslint-plugin-react-hooks';
import path from 'node:path';

// Role packages talk through the store and the bus, never by importing each other.
const roles = ['api', 'scheduler', 'runners', 'log-ingest', 'notifier', 'server', 'dashboard'];
// common is imported by concern (ARCHITECTURE.md, "Entry points of common"); there is no root barrel.
const commonEntries = [
  { name: '@orloj/common', message: 'import @orloj/common by concern (@orloj/common/domain, /store, /bus, …); see ARCHITECTURE.md' },
];
// Each package's test support (@orloj/common/test-support, @orloj/api/test-support, …) is for tests only.
const noTestSupport = { group: ['@orloj/*/test-support'], message: 'test support is for tests only' };
// The runners role has no database: it may not load the store (nor better-sqlite3 or pg).
const noStore = [{ group: ['@orloj/common/store', 'better-sqlite3', 'pg', 'kysely'], message: 'runners have no database (see ARCHITECTURE.md)' }];
const forbidRoles = (self, allowed = [], extra = []) => ({
  files: [`${self}/src/**/*.{ts,tsx}`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: roles
          .filter((r) => r !== self && !allowed.includes(r))
          .map((r) => ({ group: [`@orloj/${r}`, `@orloj/${r}/*`], message: `${self} may not import ${r} (see ARCHITECTURE.md)` }))
          .concat(noTestSupport, extra),
        paths: commonEntries,
      },
    ],
  },
});

// common's concerns, each a folder of common/src, and the concerns each may import
// (ARCHITECTURE.md, "Concerns of common"). An import that runs the other way, or into a
// file outside these folders, is reported.
export const CONCERN_ORDER = {
  core: [],
  logging: ['core'],
  domain: ['core'],
  config: ['core', 'domain'],
  messages: ['core', 'domain'],
  store: ['core', 'domain', 'config', 'logging'],
  bus: ['core', 'config', 'logging'],
  envelope: ['core', 'domain', 'config', 'logging', 'messages', 'bus'],
  observability: ['core', 'config', 'logging', 'bus'],
};
const concernOrder = {
  meta: { type: 'problem', schema: [] },
  create(context) {
    const root = path.resolve(import.meta.dirname, 'common/src');
    const concernOf = (file) => {
      const rel = path.relative(root, file);
      return rel.startsWith('..') || path.isAbsolute(rel) ? undefined : rel.split(path.sep)[0];
    };
    const from = concernOf(context.filename);
    if (from === undefined) return {};
    const check = (node) => {
      const spec = node.source?.value;
      if (typeof spec !== 'string' || !spec.startsWith('.')) return;
      const to = concernOf(path.resolve(path.dirname(context.filename), spec));
      if (to === from) return;
      const allowed = CONCERN_ORDER[from];
      if (allowed === undefined || to === undefined || !(to in CONCERN_ORDER)) {
        const outside = allowed === undefined ? from : to ?? spec;
        context.report({ node: node.source ?? node, message: `common/src/${outside} is not one of common's concerns (concern order, ARCHITECTURE.md)` });
      } else if (!allowed.includes(to)) {
        context.report({ node: node.source, message: `common/src/${from} may not import ${to} (concern order, ARCHITECTURE.md)` });
      }
    };
    return { ImportDeclaration: check, ExportAllDeclaration: check, ExportNamedDeclaration: check, ImportExpression: check };
  },
};

// The hard cap on a file's size, in code lines (blank lines and comments are not counted, as
// for functions). OVER_CAP, the allow-list of files over it, is empty since issue 23 and stays
// so (common/test/lint-rules.test.ts): a file that grows past the cap is split by concern.
export const MAX_LINES = { max: 450, skipBlankLines: true, skipComments: true };
export const OVER_CAP = [];

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', 'dashboard/src/api/*.gen.ts', 'data/**', 'artifacts/**', '**/*.cjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'error',
    },
  },
  {
    files: ['common/src/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['@orloj/*'], message: 'common imports no other package' }] }],
    },
  },
  forbidRoles('api'),
  forbidRoles('scheduler'),
  forbidRoles('runners', [], noStore),
  forbidRoles('log-ingest'),
  forbidRoles('notifier'),
  // The dashboard talks to the api over HTTP only: no role package in the browser bundle.
  forbidRoles('dashboard'),
  { files: ['dashboard/**/*.{ts,tsx}'], ...reactHooks.configs.flat.recommended },
  // Bus message bodies are typed by common/src/messages/index.ts and decoded once, on the
  // consume path: a role never casts one (docs/bus.md, "Typed messages").
  {
    files: ['{api,scheduler,runners,log-ingest,notifier,server}/src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...['TSAsExpression', 'TSTypeAssertion'].map((cast) => ({
          selector: `${cast} > MemberExpression.expression[property.name='body']`,
          message: 'Do not cast a message body: add or fix its decoder in common/src/messages/index.ts and take the typed body (docs/bus.md).',
        })),
      ],
    },
  },
  // A test reaches another package's test support or sources through its package entry
  // (@orloj/<package>/test-support, @orloj/common/store, …), never by a relative path into it.
  // A focused test (.only) left in a commit silently drops every other test of the run.
  {
    files: ['**/*.{ts,tsx,js,cjs,mjs}'],
    rules: {
      'no-restricted-properties': [
        'error',
        ...['describe', 'context', 'it', 'specify', 'test', 'suite'].map((object) => ({
          object,
          property: 'only',
          message: 'a focused test runs alone and hides the rest of the suite; remove .only before committing',
        })),
      ],
    },
  },
  {
    files: ['*/test/**/*.{ts,tsx}'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: `^(\\.\\./){2,}(${['common', ...roles].join('|')})/`,
              message: "import another package's test support or sources through its entry (@orloj/<package>/test-support, @orloj/common/store, …); see ARCHITECTURE.md",
            },
          ],
        },
      ],
    },
  },
  {
    files: ['common/src/**/*.ts'],
    plugins: { orloj: { rules: { 'concern-order': concernOrder } } },
    rules: { 'orloj/concern-order': 'error' },
  },
  // Unit size (ARCHITECTURE.md, "Conventions"): no function over 100 code lines and no file
  // over 450, in the sources, the benchmarks and the harness scripts; tests are exempt.
  {
    files: ['*/src/**/*.{ts,tsx}', 'bench/**/*.ts', 'scripts/**/*.ts', 'dashboard/scripts/**/*.ts'],
    ignores: ['**/test/**', '**/*.test.{ts,tsx}'],
    rules: { 'max-lines-per-function': ['error', { max: 100, skipBlankLines: true, skipComments: true }] },
  },
  {
    files: ['*/src/**/*.{ts,tsx}', 'bench/**/*.ts', 'scripts/**/*.ts', 'dashboard/scripts/**/*.ts'],
    ignores: ['**/test/**', '**/*.test.{ts,tsx}', ...OVER_CAP],
    rules: { 'max-lines': ['error', MAX_LINES] },
  },
  // the composition root starts every role
  forbidRoles('server', ['api', 'scheduler', 'runners', 'log-ingest', 'notifier']),
  { files: ['**/test/**/*.ts', 'bench/**/*.ts', 'scripts/**', 'dashboard/scripts/**', 'server/src/bin.ts'], rules: { 'no-console': 'off' } },
);
