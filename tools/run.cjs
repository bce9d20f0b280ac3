#!/usr/bin/env node
// Runs a TypeScript entry point of this repository directly: SWC transpiles on load, keeping
// decorator metadata for Nest, and @llmgw/* resolves through tsconfig.base.json paths.
// Usage: node tools/run.cjs <file.ts> [args...]
'use strict';
const path = require('node:path');
const root = path.resolve(__dirname, '..');
process.env.SWC_NODE_PROJECT = process.env.SWC_NODE_PROJECT || path.join(root, 'tsconfig.base.json');
require('@swc-node/register');
const entry = process.argv[2];
if (!entry) {
  process.stderr.write('usage: node tools/run.cjs <file.ts> [args...]\n');
  process.exit(2);
}
process.argv.splice(1, 2, path.resolve(entry));
require(path.resolve(entry));
