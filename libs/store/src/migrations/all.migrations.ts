import type { MigrationInterface } from 'typeorm';
import { Initial1767225600000 } from './1767225600000-initial.migration';
import { NodeDraining1795996800000 } from './1795996800000-node-draining.migration';
import { NodeCredentials1796083200000 } from './1796083200000-node-credentials.migration';
import { ApiKeys1796169600000 } from './1796169600000-api-keys.migration';
import { AdminTokens1796256000000 } from './1796256000000-admin-tokens.migration';
import { KeyUsage1796342400000 } from './1796342400000-key-usage.migration';

/** Every schema migration in order; the name's 13-digit suffix orders them. Append, never edit a shipped one. */
export const MIGRATIONS: readonly (new () => MigrationInterface)[] = [Initial1767225600000, NodeDraining1795996800000, NodeCredentials1796083200000, ApiKeys1796169600000, AdminTokens1796256000000, KeyUsage1796342400000];
