import { availableParallelism } from 'node:os';
import { parseCli, USAGE } from './cli.parser';
import { LlamaEngine } from './engine.server';

// llama-engine: a llama-server-compatible engine on node-llama-cpp, for machines without a
// llama-server binary. `node tools/run.cjs tools/llama-engine/src/main.ts -m MODEL.gguf ...`
// (or tools/llama-engine/bin/llama-server-node). Exit codes: 0 after SIGTERM/SIGINT, 1 when the
// model cannot be loaded or its worker dies, 2 for bad arguments.

/** How long a failed engine keeps answering /health 500 before it exits, so a poller can read why. */
const FAILED_EXIT_DELAY_MS = 1_000;
/** Longest a shutdown may take before the process exits anyway. */
const SHUTDOWN_DEADLINE_MS = 5_000;

const log = (line: string): void => {
  process.stderr.write(`llama-engine: ${line}\n`);
};

const parsed = parseCli(process.argv.slice(2), availableParallelism());
if (parsed.kind === 'help') {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (parsed.kind === 'error') {
  for (const problem of parsed.problems) process.stderr.write(`llama-engine: ${problem}\n`);
  process.stderr.write('llama-engine: run with --help for the flags it takes\n');
  process.exit(2);
}
const config = parsed.config;
if (config.gpuLayers !== undefined && config.gpuLayers !== 0) log(`-ngl ${config.gpuLayers} ignored: this engine runs on the CPU only`);

let exiting = false;
const engine = new LlamaEngine(config, {
  log,
  fatal: () => {
    setTimeout(() => void shutdown(1), FAILED_EXIT_DELAY_MS).unref();
  },
});

async function shutdown(code: number): Promise<void> {
  if (exiting) return;
  exiting = true;
  setTimeout(() => process.exit(code), SHUTDOWN_DEADLINE_MS).unref();
  await engine.stop().catch((error: unknown) => log(`error while stopping: ${error instanceof Error ? error.message : String(error)}`));
  process.exit(code);
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    log(`${signal} received, stopping`);
    void shutdown(engine.phase.kind === 'failed' ? 1 : 0);
  });
}

engine.start().then(
  (address) => {
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    process.stdout.write(`llama-engine listening on http://${host}:${address.port}\n`);
  },
  (error: unknown) => {
    log(`cannot listen on ${config.host}:${config.port}: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  },
);
