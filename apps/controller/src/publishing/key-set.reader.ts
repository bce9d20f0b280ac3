import type { KeySetView, ManagedKey } from '@llmgw/domain';
import type { ApiKeyRecord } from '@llmgw/store';

/**
 * The API keys routers must accept, read from the store (where the catalog API writes them) once
 * per tick: live keys only (a revoked key is left out, so routers refuse it with the next
 * snapshot), expired ones kept (routers refuse them by their expiry and say so). The view object
 * is replaced only when what routers see changed, so an unchanged set costs no new revision.
 * Until the store has ever held a key, nothing is managed and routers keep to their key files.
 */
export class KeySetReader {
  private view: KeySetView | undefined;
  private signature = '';

  constructor(private readonly store: { list(): Promise<ApiKeyRecord[]> }) {}

  current(): KeySetView | undefined {
    return this.view;
  }

  /** Reads the keys; true when the set routers see changed. */
  async poll(): Promise<boolean> {
    const rows = await this.store.list();
    if (rows.length === 0 && this.view === undefined) return false;
    const live: ManagedKey[] = rows
      .filter((r) => r.revokedAt === undefined)
      .map((r) => ({ name: r.name, secretHash: r.secretHash, models: r.models, limits: r.limits, ...(r.expiresAt !== undefined && { expiresAt: r.expiresAt }) }));
    const signature = JSON.stringify(live);
    if (this.view !== undefined && signature === this.signature) return false;
    this.signature = signature;
    this.view = Object.freeze({ keys: live });
    return true;
  }
}
