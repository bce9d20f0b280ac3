import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { DomainError, ErrorCode } from '@llmgw/domain';
import { writeFileAtomic } from './atomic-file';

/** File in the state directory that holds the node id. */
export const NODE_ID_FILE = 'node-id';

const NODE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** True for ids the agent accepts: 1..128 of `[A-Za-z0-9._-]`, starting with a letter or digit. */
export function isValidNodeId(id: string): boolean {
  return NODE_ID_RE.test(id);
}

/** A fresh id: the host name made safe (at most 40 characters) and 8 random hex digits. */
export function newNodeId(host: string = hostname(), random: () => string = () => randomBytes(4).toString('hex')): string {
  const base = host.replace(/[^A-Za-z0-9-]/g, '-').replace(/^-+|-+$/g, '').slice(0, 40) || 'node';
  return `${base}-${random()}`;
}

/**
 * The node's stable id: read from `<stateDir>/node-id`, or generated once and written there
 * (atomically) when the file does not exist. A file that exists but does not hold a valid id is
 * an error naming the file — silently replacing it would give the node a new identity and orphan
 * its replicas in the controller's view.
 */
export function loadOrCreateNodeId(stateDir: string, generate: () => string = () => newNodeId()): { nodeId: string; created: boolean } {
  const file = join(stateDir, NODE_ID_FILE);
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (text !== undefined) {
    const id = text.trim();
    if (!isValidNodeId(id)) {
      throw new DomainError(ErrorCode.PreconditionFailed, `${file} does not hold a valid node id (${JSON.stringify(id.slice(0, 140))}); fix or remove it`, [
        { path: file, message: 'expected 1..128 of [A-Za-z0-9._-], starting with a letter or digit' },
      ]);
    }
    return { nodeId: id, created: false };
  }
  const nodeId = generate();
  if (!isValidNodeId(nodeId)) throw new Error(`generated node id ${JSON.stringify(nodeId)} is not valid`);
  writeFileAtomic(file, `${nodeId}\n`);
  return { nodeId, created: true };
}
