// Loads a GGUF with node-llama-cpp on CPU (one thread) and greedily generates a few tokens;
// prints {"loaded":true,"tokens":N,"text":...}. Run in its own process: llama.cpp aborts the
// process on a malformed file. Usage: node load-check.mjs MODEL [TOKENS]
import { getLlama } from 'node-llama-cpp';

const [modelPath, count = '8'] = process.argv.slice(2);
const llama = await getLlama({ gpu: false, maxThreads: 1, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize: 256, threads: 1 });
const out = [];
for await (const token of context.getSequence().evaluate(model.tokenize('Hello llmgw'), { temperature: 0 })) {
  out.push(token);
  if (out.length >= Number(count)) break;
}
process.stdout.write(JSON.stringify({ loaded: true, tokens: out.length, text: model.detokenize(out) }) + '\n');
await context.dispose();
await model.dispose();
await llama.dispose();
