// The engine simulator's process: parse flags, start the server, stop cleanly on a signal.
// stdout carries machine-readable lines ("sim-engine listening on http://HOST:PORT",
// "sim-engine ready"); stderr carries diagnostics. Exit codes: 0 stopped by a signal,
// 1 failed to start or crashed on purpose (--crash-after), 2 bad command line.
import { parseArgs, USAGE } from './cli.parser';
import { SimEngineServer } from './sim-engine.server';

function main(): void {
  const parsed = parseArgs(process.argv.slice(2));
  if (parsed.kind === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  if (parsed.kind === 'error') {
    process.stderr.write(`sim-engine: invalid command line:\n${parsed.problems.map((p) => `  ${p}`).join('\n')}\n\n${USAGE}`);
    process.exit(2);
  }
  const server = new SimEngineServer(parsed.config, {
    clock: { now: () => performance.now() },
    wallClock: { now: () => Date.now() },
    announce: (line) => process.stdout.write(`${line}\n`),
    warn: (line) => process.stderr.write(`${line}\n`),
    exit: (code) => process.exit(code),
  });

  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`sim-engine stopping (${signal})\n`);
    server.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  server.start().catch((err: unknown) => {
    if (stopping) return; // closed while loading
    process.stderr.write(`sim-engine: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}

main();
