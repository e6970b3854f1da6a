// ESLint (flat config) for the extension: typescript-eslint's type-checked recommended rules on src/ and test/.
// `npm run lint`; `npm run typecheck` is `tsc --strict --noEmit` (tsconfig.json). Both run in .ci/run.
import eslint from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['out/**', 'dist/**', 'node_modules/**', 'e2e/**', '*.vsix'] },
  {
    files: ['src/**/*.ts', 'test/**/*.ts'],
    extends: [eslint.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // a `let` assigned once, after the closures that read it are made (the client's error handler, a progress
      // subscription): const would have to move below its readers
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // node:test's test() returns a promise the runner itself awaits
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it'] }] },
      ],
    },
  },
);
