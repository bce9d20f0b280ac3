import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DomainError, ErrorCode } from '@llmgw/domain';
import { writeFileAtomic } from './atomic-file';

/** File in the state directory that holds the secret the controller bound this node id to. */
export const NODE_SECRET_FILE = 'node-secret';

const SECRET_RE = /^[A-Za-z0-9_-]{16,512}$/;

/**
 * The node secret the controller issued at this node's first join (`Welcome.node_secret`),
 * kept in `<stateDir>/node-secret` (mode 0600, written atomically) and sent on every Register.
 * Losing it locks the node id out until an operator runs `llmgw nodes forget`; a file that does
 * not hold a secret is an error naming it rather than a silent new identity.
 */
export class NodeSecretStore {
  private readonly file: string;
  private value: string | undefined;

  constructor(stateDir: string) {
    this.file = join(stateDir, NODE_SECRET_FILE);
    this.value = this.load();
  }

  /** The secret held, or undefined before the first join. */
  secret(): string | undefined {
    return this.value;
  }

  /** Keeps a newly issued secret: at once in memory (so a failed write still reconnects), then on disk. */
  save(secret: string): void {
    if (!SECRET_RE.test(secret)) throw new Error('the controller issued a node secret of an unexpected form');
    this.value = secret;
    writeFileAtomic(this.file, `${secret}\n`, 0o600);
  }

  private load(): string | undefined {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const secret = text.trim();
    if (!SECRET_RE.test(secret)) {
      throw new DomainError(ErrorCode.PreconditionFailed, `${this.file} does not hold a node secret; remove it and run \`llmgw nodes forget <node>\` so the node can join again`, [
        { path: this.file, message: 'expected 16..512 of [A-Za-z0-9_-]' },
      ]);
    }
    return secret;
  }
}
