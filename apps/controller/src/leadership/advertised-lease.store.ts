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
  /** Base URL of its admin API (`http://host:port`), when it advertised one. */
  readonly adminUrl?: string;
  readonly generation: number;
  /** The claim is valid until then, ms since the epoch (the writer's clock). */
  readonly expiresAt: number;
  /** The claim has not expired. */
  readonly held: boolean;
}

const SEPARATOR = '@';
/** Between the gRPC address and the admin URL; neither can hold a blank. */
const URL_SEPARATOR = ' ';

/** What a controller advertises of itself in the lease row while it leads. */
export interface Advertised {
  readonly address?: string;
  readonly adminUrl?: string;
}

/**
 * A LeaseStore that writes the owner as `<owner id>@<advertised address>[ <admin URL>]` in the
 * lease row, so a standby can tell agents and routers where the leader is
 * (NotLeader.leader_address), and forward admin changes to it, without a table of its own. The owner id stays random per process start; the address is only carried along. Fences
 * must carry the same stored owner: use {@link storedFence}.
 */
export class AdvertisedLeaseStore implements LeaseStore {
  constructor(
    private readonly inner: LeaseReader,
    private readonly advertised: Advertised,
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
    const { owner, address, adminUrl } = parseOwner(row.owner);
    return { owner, ...(address !== undefined ? { address } : {}), ...(adminUrl !== undefined ? { adminUrl } : {}), generation: row.generation, expiresAt: row.expiresAt, held: row.held };
  }

  /** The fence as the store must check it: the same owner text the claims wrote. */
  storedFence(fence: Fence): Fence {
    return fence.kind === 'lease' ? { ...fence, owner: this.stored(fence.owner) } : fence;
  }

  private stored(owner: string): string {
    const { address, adminUrl } = this.advertised;
    if (address === undefined && adminUrl === undefined) return owner;
    return `${owner}${SEPARATOR}${address ?? ''}${adminUrl !== undefined ? `${URL_SEPARATOR}${adminUrl}` : ''}`;
  }
}

/** Splits a stored owner into the id, the advertised address and admin URL (each absent when none was written). */
export function parseOwner(stored: string): { owner: string; address?: string; adminUrl?: string } {
  const at = stored.indexOf(SEPARATOR);
  if (at < 0) return { owner: stored };
  const rest = stored.slice(at + 1);
  const blank = rest.indexOf(URL_SEPARATOR);
  const address = blank < 0 ? rest : rest.slice(0, blank);
  return { owner: stored.slice(0, at), ...(address !== '' && { address }), ...(blank >= 0 && { adminUrl: rest.slice(blank + 1) }) };
}
