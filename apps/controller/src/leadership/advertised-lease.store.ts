import type { Fence, LeaseRecord, LeaseStore } from '@llmgw/lease';

/** The lease reads this needs beyond claiming (the store's lease repository has them). */
export interface LeaseReader extends LeaseStore {
  get(name: string): Promise<(LeaseRecord & { readonly held: boolean }) | undefined>;
}

/** Who holds a lease, as a standby tells agents. */
export interface LeaseHolder {
  /** The holder's random owner id. */
  readonly owner: string;
  /** `host:port` of its gRPC listener, when it advertised one. */
  readonly address?: string;
  readonly generation: number;
  /** The claim is valid until then, ms since the epoch (the writer's clock). */
  readonly expiresAt: number;
  /** The claim has not expired. */
  readonly held: boolean;
}

const SEPARATOR = '@';

/**
 * A LeaseStore that writes the owner as `<owner id>@<advertised address>` in the lease row, so a
 * standby can tell agents where the leader is (NotLeader.leader_address) without a table of its
 * own. The owner id stays random per process start; the address is only carried along. Fences
 * must carry the same stored owner: use {@link storedFence}.
 */
export class AdvertisedLeaseStore implements LeaseStore {
  constructor(
    private readonly inner: LeaseReader,
    private readonly address: string | undefined,
  ) {}

  async claim(name: string, owner: string, now: number, ttlMs: number): Promise<LeaseRecord | undefined> {
    const record = await this.inner.claim(name, this.stored(owner), now, ttlMs);
    return record && { ...record, owner: parseOwner(record.owner).owner };
  }

  release(name: string, owner: string): Promise<void> {
    return this.inner.release(name, this.stored(owner));
  }

  /** The current holder of `name`, or undefined if nobody ever claimed it. */
  async holder(name: string): Promise<LeaseHolder | undefined> {
    const row = await this.inner.get(name);
    if (!row) return undefined;
    const { owner, address } = parseOwner(row.owner);
    return { owner, ...(address !== undefined ? { address } : {}), generation: row.generation, expiresAt: row.expiresAt, held: row.held };
  }

  /** The fence as the store must check it: the same owner text the claims wrote. */
  storedFence(fence: Fence): Fence {
    return fence.kind === 'lease' ? { ...fence, owner: this.stored(fence.owner) } : fence;
  }

  private stored(owner: string): string {
    return this.address === undefined ? owner : `${owner}${SEPARATOR}${this.address}`;
  }
}

/** Splits a stored owner into the id and the advertised address (absent when none was written). */
export function parseOwner(stored: string): { owner: string; address?: string } {
  const at = stored.indexOf(SEPARATOR);
  if (at < 0) return { owner: stored };
  return { owner: stored.slice(0, at), address: stored.slice(at + 1) };
}
