// Lint rules that keep the architecture honest (ARCHITECTURE §1, CONVENTIONS 2, 13):
// pure libs import no framework, driver, gRPC or I/O module and read no env, clock or
// randomness; apps never import apps; @llmgw/testing is for test files only.
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

const PURE_BANNED_PACKAGES = [
  '@nestjs/*',
  'typeorm',
  'pg',
  'pg-*',
  'sqlite3',
  'mysql2',
  '@grpc/*',
  'ioredis',
  'redis',
  'prom-client',
  'pino',
  'express',
];
const PURE_BANNED_MODULES = [
  'fs', 'node:fs', 'fs/promises', 'node:fs/promises',
  'net', 'node:net', 'http', 'node:http', 'https', 'node:https',
  'child_process', 'node:child_process', 'dgram', 'node:dgram',
  'worker_threads', 'node:worker_threads', 'os', 'node:os',
  'timers', 'node:timers', 'timers/promises', 'node:timers/promises',
];
// Randomness from node:crypto (hashing stays allowed: cache names are digests).
const CRYPTO_RANDOM = ['randomUUID', 'randomBytes', 'randomInt', 'randomFill', 'randomFillSync', 'getRandomValues', 'webcrypto'];
const TIMERS = ['setTimeout', 'setInterval', 'setImmediate', 'clearTimeout', 'clearInterval', 'clearImmediate'];
const TEST_FILES = ['**/*.spec.ts', '**/*.e2e.ts', '**/*.test.ts', '**/test/**/*.ts', '**/e2e/**/*.ts'];

export default [
  { ignores: ['**/__fixtures__/**', '**/node_modules/**', '**/dist/**', 'tmp/**', '.nx/**', '.llmgw/**', 'libs/proto/src/gen/**'] },
  ...tseslint.configs.recommended,
  {
    // CommonJS entry points (bins, the TypeScript runner) use require by definition.
    files: ['**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['**/*.ts', '**/*.mts'],
    plugins: { '@nx': nx },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          allow: [],
          depConstraints: [
            { sourceTag: 'lib:domain', onlyDependOnLibsWithTags: ['lib:domain'] },
            { sourceTag: 'lib:catalog', onlyDependOnLibsWithTags: ['lib:domain'] },
            { sourceTag: 'lib:placement', onlyDependOnLibsWithTags: ['lib:domain', 'lib:catalog'] },
            { sourceTag: 'lib:metrics-mappings', onlyDependOnLibsWithTags: ['lib:domain', 'lib:testing'] },
            { sourceTag: 'lib:control', onlyDependOnLibsWithTags: ['lib:domain', 'lib:catalog', 'lib:placement', 'lib:metrics-mappings'] },
            { sourceTag: 'lib:routing', onlyDependOnLibsWithTags: ['lib:domain', 'lib:metrics-mappings'] },
            { sourceTag: 'lib:lease', onlyDependOnLibsWithTags: ['lib:domain'] },
            { sourceTag: 'lib:limits', onlyDependOnLibsWithTags: ['lib:domain', 'lib:testing'] },
            { sourceTag: 'lib:engines', onlyDependOnLibsWithTags: ['lib:domain', 'lib:catalog', 'lib:metrics-mappings'] },
            { sourceTag: 'lib:proto', onlyDependOnLibsWithTags: ['lib:proto'] },
            { sourceTag: 'lib:config', onlyDependOnLibsWithTags: ['lib:domain'] },
            { sourceTag: 'lib:observability', onlyDependOnLibsWithTags: ['lib:domain', 'lib:config'] },
            { sourceTag: 'lib:tls', onlyDependOnLibsWithTags: ['lib:config', 'lib:testing'] },
            { sourceTag: 'lib:store', onlyDependOnLibsWithTags: ['lib:domain', 'lib:lease', 'lib:catalog', 'lib:config', 'lib:testing'] },
            { sourceTag: 'type:testing', notDependOnLibsWithTags: ['type:app', 'type:tool'] },
            { sourceTag: 'type:tool', notDependOnLibsWithTags: ['type:app'] },
            { sourceTag: 'type:app', notDependOnLibsWithTags: ['type:app', 'type:tool'] },
            {
              sourceTag: 'type:pure',
              bannedExternalImports: [...PURE_BANNED_PACKAGES, ...PURE_BANNED_MODULES],
            },
            { sourceTag: 'type:core', bannedExternalImports: PURE_BANNED_PACKAGES },
          ],
        },
      ],
    },
  },
  {
    // Only libs/config reads the environment.
    files: ['apps/**/*.ts', 'libs/**/*.ts'],
    ignores: [...TEST_FILES, 'libs/config/**', 'libs/testing/**'],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'only libs/config reads process.env' },
      ],
    },
  },
  {
    // Fakes and harnesses never reach production code.
    files: ['apps/**/*.ts', 'libs/**/*.ts', 'tools/**/*.ts'],
    ignores: [...TEST_FILES, 'libs/testing/**', 'tools/bench/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: [{ name: '@llmgw/testing', message: '@llmgw/testing is for tests only' }] },
      ],
    },
  },
  {
    // Pure libraries: no I/O modules (belt and braces for node builtins), no env, clock, timers or
    // randomness.
    files: ['libs/{domain,catalog,placement,routing,metrics-mappings,lease,control}/src/**/*.ts'],
    ignores: TEST_FILES,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...PURE_BANNED_MODULES.map((name) => ({ name, message: 'pure libs do no I/O; take a port instead' })),
            ...['crypto', 'node:crypto'].map((name) => ({ name, importNames: CRYPTO_RANDOM, message: 'take an Rng' })),
            { name: '@llmgw/testing', message: '@llmgw/testing is for tests only' },
          ],
          patterns: [{ group: PURE_BANNED_PACKAGES, message: 'pure libs import no framework, driver, gRPC or metrics client' }],
        },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'only libs/config reads process.env' },
        { object: 'Date', property: 'now', message: 'take a Clock' },
        { object: 'Math', property: 'random', message: 'take an Rng' },
        ...CRYPTO_RANDOM.map((property) => ({ object: 'crypto', property, message: 'take an Rng' })),
      ],
      'no-restricted-globals': ['error', ...TIMERS.map((name) => ({ name, message: 'pure libs keep no timers; take a Scheduler or a Clock' }))],
      'no-restricted-syntax': [
        'error',
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'take a Clock' },
      ],
    },
  },
  {
    // The one runtime Clock and Scheduler apps wire in (the ports they implement are pure).
    files: ['libs/domain/src/system-time.ts'],
    rules: { 'no-restricted-globals': 'off', 'no-restricted-properties': 'off' },
  },
];
