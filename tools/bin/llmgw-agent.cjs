#!/usr/bin/env node
// `npx llmgw-agent [discover …]`: the node agent (apps/agent).
'use strict';
const path = require('node:path');
process.argv.splice(2, 0, path.join(__dirname, '..', '..', 'apps', 'agent', 'src', 'main.ts'));
require('../run.cjs');
