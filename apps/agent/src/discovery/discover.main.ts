// Runs discovery alone, without the rest of the agent: node tools/run.cjs apps/agent/src/discovery/discover.main.ts [--json]
import { runDiscoverCommand } from './discover.command';

runDiscoverCommand([process.argv[0], process.argv[1], 'discover', ...process.argv.slice(2)]).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`llmgw-agent discover: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
