import { runCli } from './cli';
import { COMMANDS } from './commands';

// The `llmgw` command line: wiring only; each command lives in ./commands.
void runCli(COMMANDS, process.argv.slice(2), {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  isTTY: Boolean(process.stdout.isTTY),
  cwd: process.cwd(),
}).then((code) => {
  process.exitCode = code;
});
