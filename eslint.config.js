// ESLint (flat config) for every JS file of the repository; `npm run lint` runs `eslint .`.
// ESLint's recommended rules, plus rules the code already keeps that catch bugs (none is about layout), and the
// globals each folder's code really runs with.
import js from '@eslint/js';
import globals from 'globals';

// What the modules shared by the page, the workers and Node may touch (each checks where it runs).
const everywhere = { ...globals.browser, ...globals.worker, ...globals.node };

export default [
  { ignores: ['node_modules/', 'build/', 'public/', 'test-results/', 'playwright-report/'] },
  js.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2022, sourceType: 'module' },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      'no-unused-vars': ['error', { varsIgnorePattern: '^_$' }],  // `for await (const _ of generation)`
      'array-callback-return': 'error',
      eqeqeq: 'error',
      'no-duplicate-imports': 'error',
      'no-eval': 'error',        // the page runs under a CSP without 'unsafe-eval'
      'no-implied-eval': 'error',
      'no-new-func': 'error',
      'no-restricted-globals': ['error', 'event', 'name', 'length', 'status'],  // window.* read by mistake
      'no-self-compare': 'error',
      'no-shadow': 'error',
      'no-template-curly-in-string': 'error',
      'no-throw-literal': 'error',
      'no-unmodified-loop-condition': 'error',
      'no-var': 'error',
      'prefer-const': 'error',
      'prefer-promise-reject-errors': 'error',
    },
  },
  { files: ['web/lib/**/*.js'], languageOptions: { globals: everywhere } },
  { files: ['web/page/**/*.js', 'web/widget/**/*.js'], languageOptions: { globals: globals.browser } },
  { files: ['web/lib/worker/worker.js'], languageOptions: { globals: globals.worker } },
  { files: ['web/cli/**/*.js'], languageOptions: { globals: globals.node } },
  // Product code stays in files and functions one can read whole: lines counted without blank lines and comments,
  // so that explaining why costs nothing.
  {
    files: ['web/**/*.js'],
    rules: {
      'max-lines': ['error', { max: 400, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  // Jest suites run in Node; Playwright specs and the cross-browser suite run in Node and hand callbacks to the page
  // (page.evaluate, session.evaluate).
  { files: ['tests/js/**/*.js'], languageOptions: { globals: { ...globals.node, ...globals.jest } } },
  { files: ['tests/e2e/**/*.js', 'tests/browsers/**/*.{js,mjs}'], languageOptions: { globals: { ...globals.node, ...globals.browser } } },
  { files: ['tools/**/*.mjs', 'tests/fuzz/**/*.mjs', 'tests/bundler-example/build.mjs', '*.config.js'], languageOptions: { globals: globals.node } },
  { files: ['tests/bundler-example/main.js'], languageOptions: { globals: globals.browser } },
  { files: ['tools/bench/runtimes.mjs'], languageOptions: { globals: { ...globals.node, ...globals.browser } } },
  { files: ['tools/bench/browser_worker.mjs'], languageOptions: { globals: globals.worker } },
  { files: ['tools/bench/measure.mjs', 'tools/bench/wasm_driver.mjs'], languageOptions: { globals: everywhere } },
];
