// `npm start`: the whole of llmgw on one machine — controller, catalog API, router and one agent
// as separate processes, SQLite under ./.llmgw, one tiny CPU model. Ctrl-C stops everything.
// Settings: the apps' own LLMGW_* variables (ports, LLMGW_DATA_DIR, LLMGW_HOST, ...) plus
// LLMGW_LAUNCHER_CATALOG and LLMGW_LAUNCHER_READY_TIMEOUT (tools/launcher/src/launcher.config.ts).
import { loadConfigOrExit } from '@llmgw/config';
import { launcherConfigSchema } from './launcher.config';
import { LocalClusterLauncher } from './local-cluster.launcher';

const config = loadConfigOrExit('llmgw', launcherConfigSchema);
const launcher = new LocalClusterLauncher(config, {
  write: (text) => process.stdout.write(text),
  env: process.env,
  color: process.stdout.isTTY === true && process.env.NO_COLOR === undefined,
  execPath: process.execPath,
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => launcher.onSignal(signal));

launcher.run().then(
  (code) => {
    // Let the last lines reach a pipe before exiting.
    process.stdout.write('', () => process.exit(code));
  },
  (error: unknown) => {
    process.stderr.write(`llmgw: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    void launcher.stop('internal error').finally(() => process.exit(1));
  },
);
