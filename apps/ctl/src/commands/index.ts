import type { CliCommand } from '../cli-io';

/** Every `llmgw` sub-command; main dispatches on the longest matching path. */
export const COMMANDS: readonly CliCommand[] = [];
