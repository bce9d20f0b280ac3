#!/usr/bin/env node
// `npx llmgw …`: the operator command line (apps/ctl).
'use strict';
const path = require('node:path');
process.argv.splice(2, 0, path.join(__dirname, '..', '..', 'apps', 'ctl', 'src', 'main.ts'));
require('../run.cjs');
