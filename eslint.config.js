import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import reactHooks from 'eslint-plugin-react-hooks';

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

// A file past ~450 lines opens with a comment naming the one idea it holds ("One idea: …").
const oneIdea = {
  meta: { type: 'suggestion', schema: [{ type: 'integer', minimum: 1 }] },
  create(context) {
    const max = context.options[0] ?? 450;
    return {
      Program(program) {
        const { lines } = context.sourceCode;
        if (lines.length <= max) return;
        const first = program.body[0];
        const opening = context.sourceCode.getAllComments().filter((c) => first === undefined || c.range[1] <= first.range[0]);
        if (opening.some((c) => c.value.includes('One idea:'))) return;
        context.report({
          loc: { line: 1, column: 0 },
          message: `${lines.length} lines: open with a comment naming the one idea this file holds ("One idea: …"), or split it (ARCHITECTURE.md, "Conventions")`,
        });
      },
    };
  },
};

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
  // Bus message bodies are typed by common/src/messages.ts and decoded once, on the
  // consume path: a role never casts one (docs/bus.md, "Typed messages").
  {
    files: ['{api,scheduler,runners,log-ingest,notifier,server}/src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...['TSAsExpression', 'TSTypeAssertion'].map((cast) => ({
          selector: `${cast} > MemberExpression.expression[property.name='body']`,
          message: 'Do not cast a message body: add or fix its decoder in common/src/messages.ts and take the typed body (docs/bus.md).',
        })),
      ],
    },
  },
  // A test reaches another package's test support or sources through its package entry
  // (@orloj/<package>/test-support, @orloj/common/store, …), never by a relative path into it.
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
  // Unit size (ARCHITECTURE.md, "Conventions"): no function over 100 lines, and a file past
  // 450 names its one idea, in the sources, the benchmarks and the harness scripts; tests are exempt.
  {
    files: ['*/src/**/*.{ts,tsx}', 'bench/**/*.ts', 'scripts/**/*.ts', 'dashboard/scripts/**/*.ts'],
    ignores: ['**/test/**', '**/*.test.{ts,tsx}'],
    plugins: { orloj: { rules: { 'one-idea': oneIdea } } },
    rules: {
      'max-lines-per-function': ['error', { max: 100, skipBlankLines: true, skipComments: true }],
      'orloj/one-idea': ['error', 450],
    },
  },
  // the composition root starts every role
  forbidRoles('server', ['api', 'scheduler', 'runners', 'log-ingest', 'notifier']),
  { files: ['**/test/**/*.ts', 'bench/**/*.ts', 'scripts/**', 'dashboard/scripts/**', 'server/src/bin.ts'], rules: { 'no-console': 'off' } },
);
