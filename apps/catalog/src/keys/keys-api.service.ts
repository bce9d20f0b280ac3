import { Catalog, validateApiKeyPatch, validateApiKeySpec, type KnownModel } from '@llmgw/catalog';
import { DomainError, ErrorCode, type Clock, type KeyLimits } from '@llmgw/domain';
import { ProblemError, secretHash } from '@llmgw/observability';
import type { ApiKeyRecord, CatalogRepository, TypeormApiKeyRepository } from '@llmgw/store';
import type { IfMatch } from '../api/entity-tag.parser';

/** The store the keys API needs. */
export interface KeysApiStore {
  readonly apiKeys: Pick<TypeormApiKeyRepository, 'create' | 'get' | 'list' | 'update' | 'revoke'>;
  readonly catalog: Pick<CatalogRepository, 'current'>;
}

/** A key as the API shows it: never its secret or the secret's hash. */
export interface KeyView {
  name: string;
  owner: string;
  models: string[];
  limits: KeyLimits;
  /** `active`, `expired` (past expiresAt) or `revoked`. */
  state: 'active' | 'expired' | 'revoked';
  expiresAt?: string;
  createdAt: string;
  updatedAt: string;
  revokedAt?: string;
  revision: number;
}

/** The secret's prefix, so a leaked key is recognisable in a scanner's report. */
export const API_KEY_PREFIX = 'llmgw-';
/** Random bytes in a secret: 256 bits. */
const SECRET_BYTES = 32;

/**
 * API keys: created with a random secret shown once, listed and changed without it, revoked for
 * good. Model lists are checked against the catalog as it is now. Writes of one key are
 * compare-and-set on its revision (`If-Match` or, without one, the revision just read).
 */
export class KeysApiService {
  constructor(
    private readonly store: KeysApiStore,
    private readonly randomBytes: (n: number) => Buffer,
    private readonly clock: Clock,
  ) {}

  async create(body: unknown): Promise<{ key: KeyView; secret: string }> {
    const { spec, problems } = validateApiKeySpec(body, await this.knownModels(), this.clock.now());
    if (spec === undefined) throw new ProblemError('invalid-body', `${problems.length} problem${problems.length === 1 ? '' : 's'}; no key was created`, problems);
    const secret = `${API_KEY_PREFIX}${this.randomBytes(SECRET_BYTES).toString('base64url')}`;
    const row = await this.store.apiKeys.create(spec.name, spec, secretHash(secret));
    return { key: this.view(row), secret };
  }

  async list(): Promise<{ keys: KeyView[] }> {
    return { keys: (await this.store.apiKeys.list()).map((k) => this.view(k)) };
  }

  async get(name: string): Promise<KeyView> {
    return this.view(await this.existing(name));
  }

  async update(name: string, body: unknown, ifMatch: IfMatch): Promise<KeyView> {
    const { patch, problems } = validateApiKeyPatch(body, await this.knownModels(), this.clock.now());
    if (patch === undefined) throw new ProblemError('invalid-body', `${problems.length} problem${problems.length === 1 ? '' : 's'}; the key was not changed`, problems);
    const current = await this.existing(name);
    if (current.revokedAt !== undefined) throw new DomainError(ErrorCode.Conflict, `API key '${name}' is revoked: it cannot change`);
    if (ifMatch.kind === 'revisions' && !ifMatch.revisions.includes(current.revision)) {
      throw new ProblemError('precondition-failed', `API key '${name}' is at revision ${current.revision}, not ${ifMatch.revisions.join(', ')}; read it again and reapply your change`, [], {
        currentRevision: current.revision,
      });
    }
    const expiresAt = patch.expiresAt === null ? undefined : (patch.expiresAt ?? current.expiresAt);
    const next = await this.store.apiKeys.update(
      name,
      { owner: patch.owner ?? current.owner, models: patch.models ?? current.models, limits: patch.limits ?? current.limits, ...(expiresAt !== undefined && { expiresAt }) },
      current.revision,
    );
    if (next === undefined) throw new DomainError(ErrorCode.Conflict, `API key '${name}' changed meanwhile; read it again and reapply your change`);
    return this.view(next);
  }

  async revoke(name: string): Promise<KeyView> {
    const row = await this.store.apiKeys.revoke(name);
    if (row === undefined) throw notFound(name);
    return this.view(row);
  }

  private async existing(name: string): Promise<ApiKeyRecord> {
    const row = await this.store.apiKeys.get(name);
    if (row === undefined) throw notFound(name);
    return row;
  }

  private async knownModels(): Promise<KnownModel> {
    const row = await this.store.catalog.current();
    if (row === undefined) return () => false;
    const catalog = Catalog.create(row.document);
    return (name) => catalog.has(name);
  }

  private view(k: ApiKeyRecord): KeyView {
    const iso = (ms: number): string => new Date(ms).toISOString();
    const state = k.revokedAt !== undefined ? 'revoked' : k.expiresAt !== undefined && k.expiresAt <= this.clock.now() ? 'expired' : 'active';
    return {
      name: k.name,
      owner: k.owner,
      models: [...k.models],
      limits: { ...k.limits },
      state,
      ...(k.expiresAt !== undefined && { expiresAt: iso(k.expiresAt) }),
      createdAt: iso(k.createdAt),
      updatedAt: iso(k.updatedAt),
      ...(k.revokedAt !== undefined && { revokedAt: iso(k.revokedAt) }),
      revision: k.revision,
    };
  }
}

function notFound(name: string): DomainError {
  return new DomainError(ErrorCode.NotFound, `no API key named '${name}'`);
}
