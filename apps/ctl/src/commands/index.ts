import type { CliCommand } from '../cli-io';
import { catalogApplyCommand } from './catalog-apply.command';
import { catalogDeleteCommand } from './catalog-delete.command';
import { catalogGetCommand } from './catalog-get.command';
import { catalogValidateCommand } from './catalog-validate.command';
import { CERTS_COMMANDS } from './certs.command';
import { eventsCommand } from './events.command';
import { explainCommand } from './explain.command';
import { gcCommand } from './gc.command';
import { KEYS_COMMANDS } from './keys.command';
import { TOKENS_COMMANDS } from './tokens.command';
import { usageCommand } from './usage.command';
import { modelsCommand } from './models.command';
import { cordonCommand, drainCommand, uncordonCommand } from './node-action.command';
import { nodeForgetCommand } from './node-forget.command';
import { nodesCommand } from './nodes.command';
import { planCommand } from './plan.command';
import { replicasCommand } from './replicas.command';
import { scrapeCommand } from './scrape.command';
import { statusCommand } from './status.command';

/** Every `llmgw` sub-command; main dispatches on the longest matching path. */
export const COMMANDS: readonly CliCommand[] = [
  statusCommand,
  nodesCommand,
  nodeForgetCommand,
  replicasCommand,
  modelsCommand,
  eventsCommand,
  explainCommand,
  catalogGetCommand,
  catalogApplyCommand,
  catalogDeleteCommand,
  catalogValidateCommand,
  cordonCommand,
  uncordonCommand,
  drainCommand,
  gcCommand,
  planCommand,
  scrapeCommand,
  ...KEYS_COMMANDS,
  ...TOKENS_COMMANDS,
  usageCommand,
  ...CERTS_COMMANDS,
];
