import { randomBytes, timingSafeEqual } from 'node:crypto';
import { secretHash } from '@llmgw/observability';
import type { Clock } from '@llmgw/domain';
import type { NodeRepository } from '@llmgw/store';

/** How a node's Register was judged: accepted (with a secret just issued at its first join), or refused. */
export type NodeAuthentication = { readonly ok: true; readonly issued?: string } | { readonly ok: false; readonly reason: string };

/** Random bytes in a node secret (256 bits). */
const SECRET_BYTES = 32;

/** The hash stored for a secret: SHA-256, hex. A 256-bit random secret needs no slow hash. */
export function hashNodeSecret(secret: string): string {
  return secretHash(secret);
}

/**
 * Binds each node id to the secret issued at its first join and checks it on every later one.
 * Only the hash is stored. An id that is not bound (a new node, one stored before credentials
 * existed, or one forgotten by an operator) is bound at once to a fresh secret, whatever the
 * agent sent; of two racing first joins the store lets exactly one win.
 */
export class NodeCredentialService {
  constructor(
    private readonly store: Pick<NodeRepository, 'credentialHash' | 'bindCredential' | 'releaseCredential'>,
    private readonly clock: Clock,
    private readonly random: (bytes: number) => Buffer = randomBytes,
  ) {}

  /** Judges one Register; store errors reject (the caller answers UNAVAILABLE). */
  async authenticate(nodeId: string, presented: string | undefined): Promise<NodeAuthentication> {
    const stored = await this.store.credentialHash(nodeId);
    if (stored !== undefined) {
      if (presented !== undefined && hashesEqual(hashNodeSecret(presented), stored)) return { ok: true };
      return {
        ok: false,
        reason: `node id '${nodeId}' is bound to another agent (${presented === undefined ? 'no' : 'a different'} node secret); if this machine was re-installed, run \`llmgw nodes forget ${nodeId}\` once the old node is lost`,
      };
    }
    const secret = this.random(SECRET_BYTES).toString('base64url');
    if (await this.store.bindCredential(nodeId, hashNodeSecret(secret), this.clock.now())) return { ok: true, issued: secret };
    return { ok: false, reason: `node id '${nodeId}' was just bound to another agent` };
  }

  /** Undoes the binding to a secret just issued that never reached its agent (its stream went away first). */
  async release(nodeId: string, issued: string): Promise<void> {
    await this.store.releaseCredential(nodeId, hashNodeSecret(issued));
  }
}

function hashesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
