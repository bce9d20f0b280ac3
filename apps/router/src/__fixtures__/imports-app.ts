// Deliberately imports another app.
import { COMMANDS } from '../../../ctl/src/commands';

export const broken = COMMANDS;
