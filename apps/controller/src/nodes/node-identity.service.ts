import type { NodeAuthentication, NodeCredentialService } from './node-credential.service';

/**
 * Node identity checks and the forgetting of node ids, kept apart so neither can undo the
 * other: a Register's node secret is checked (NodeCredentialService) only while its id is not
 * being forgotten, and a check that a forget overlapped is void; a forget waits for the checks
 * in flight, so that its store removal also removes a credential one of them bound.
 */
export class NodeIdentities {
  /** Node ids an operator's `nodes forget` is removing now. */
  private readonly forgetting = new Set<string>();
  /** How many times each node id was forgotten: an identity check that spans one is void. */
  private readonly forgotten = new Map<string, number>();
  /** Identity checks reading or writing the store now, by node id (a forget waits for them). */
  private readonly checking = new Map<string, Set<Promise<unknown>>>();

  constructor(private readonly credentials: Pick<NodeCredentialService, 'authenticate' | 'release'>) {}

  /**
   * Checks a Register's node secret (see NodeCredentialService). Rejects (the agent is told
   * UNAVAILABLE and retries) while the id is being forgotten, and when a forget began while the
   * check ran: its answer may come from a credential the forget removes, and accepting it would
   * leave a live session on an id with no credential, open to any agent with the join token.
   */
  async authenticate(nodeId: string, secret: string | undefined): Promise<NodeAuthentication> {
    if (this.forgetting.has(nodeId)) throw new Error(`node '${nodeId}' is being forgotten`);
    const generation = this.forgotten.get(nodeId) ?? 0;
    const check = this.credentials.authenticate(nodeId, secret);
    const inFlight = this.checking.get(nodeId) ?? new Set<Promise<unknown>>();
    this.checking.set(nodeId, inFlight.add(check));
    let auth: NodeAuthentication;
    try {
      auth = await check;
    } finally {
      inFlight.delete(check);
      if (inFlight.size === 0 && this.checking.get(nodeId) === inFlight) this.checking.delete(nodeId);
    }
    if ((this.forgotten.get(nodeId) ?? 0) !== generation) throw new Error(`node '${nodeId}' was forgotten while its identity was checked`);
    return auth;
  }

  /** Undoes the binding to a secret {@link authenticate} just issued. */
  releaseSecret(nodeId: string, issued: string): Promise<void> {
    return this.credentials.release(nodeId, issued);
  }

  /** Whether the id is being forgotten now (its record must not be written meanwhile). */
  isForgetting(nodeId: string): boolean {
    return this.forgetting.has(nodeId);
  }

  /**
   * Forgets the id: from now on no Register for it is accepted and one whose check began earlier
   * is void; `remove` (the store removal) runs once those checks are over. The id is accepted
   * again when `remove` settles.
   */
  async forget(nodeId: string, remove: () => Promise<void>): Promise<void> {
    this.forgetting.add(nodeId);
    this.forgotten.set(nodeId, (this.forgotten.get(nodeId) ?? 0) + 1);
    try {
      await Promise.allSettled([...(this.checking.get(nodeId) ?? [])]);
      await remove();
    } finally {
      this.forgetting.delete(nodeId);
    }
  }
}
