import type { CliCommand } from '../cli-io';
import { catalogValidateCommand } from './catalog-validate.command';
import { planCommand } from './plan.command';
import { scrapeCommand } from './scrape.command';

/** Every `llmgw` sub-command; main dispatches on the longest matching path. */
export const COMMANDS: readonly CliCommand[] = [catalogValidateCommand, planCommand, scrapeCommand];
