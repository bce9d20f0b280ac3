import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { buildTinyModel } from './tiny-model';

// Writes the tiny demo model: `node tools/run.cjs tools/gguf/src/main.ts [OUT]`
// (default .llmgw/models/llmgw-tiny.gguf). Written to a temporary name and renamed, so a
// reader never sees half a file.
const out = resolve(process.argv[2] ?? '.llmgw/models/llmgw-tiny.gguf');
mkdirSync(dirname(out), { recursive: true });
const tmp = `${out}.partial-${process.pid}`;
const bytes = buildTinyModel();
writeFileSync(tmp, bytes);
renameSync(tmp, out);
process.stdout.write(`wrote ${out} (${bytes.length} bytes)\n`);
