// Spawns a long-running process through the harness and exits without stopping it (or, with
// --wait, waits to be killed by a signal): the harness's hooks must kill what it spawned.
// Prints "spawned <pid> <grandchild pid>".
import { join } from 'node:path';
import { spawnProcess } from '../process.harness';

async function main(): Promise<void> {
  const proc = await spawnProcess({
    command: process.execPath,
    args: [join(__dirname, 'http-server.fixture.cjs')],
    readyWhen: { stdoutMatch: /listening on (\d+)/ },
  });
  process.stdout.write(`spawned ${proc.pid} ${proc.stdout.match(/child (\d+)/)?.[1]}\n`);
  if (process.argv.includes('--wait')) setInterval(() => undefined, 1_000);
  else process.exit(0);
}

void main();
