import { Controller, Get, HttpCode, Inject, Param, Post, Req, Res, SetMetadata, UseGuards } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { API_KEY_NAME_RE } from '@llmgw/catalog';
import { ADMIN_SCOPES, DomainError, ErrorCode, type AdminScope, type Problem } from '@llmgw/domain';
import { ProblemError, secretHash } from '@llmgw/observability';
import type { AdminTokenRecord, Store } from '@llmgw/store';
import { AdminTokenGuard, TOKENS_ROUTE } from '../api/admin-token.guard';
import { readCatalogBody } from '../api/catalog-body.reader';
import { CATALOG_CONFIG, type CatalogConfig } from '../config/catalog.config';
import { CATALOG_STORE } from '../store/catalog-store.provider';

/** An admin token as the API shows it: never its secret or the secret's hash. */
export interface AdminTokenView {
  name: string;
  scopes: AdminScope[];
  createdAt: string;
  revokedAt?: string;
}

/** Injection token of the random source secrets are made from. */
export const SECRET_BYTES = Symbol('llmgw.secret-bytes');

/**
 * Admin tokens under `/v1/admin-tokens`: created with a scope set (`read`, or `read` and `write`)
 * and a secret shown once, listed without it, revoked for good. Only the bootstrap token
 * (LLMGW_CATALOG_ADMIN_TOKEN) may manage them, so a stored token can never mint a wider one.
 * The controller's admin API accepts the same tokens (same store).
 */
@Controller('v1/admin-tokens')
@UseGuards(AdminTokenGuard)
export class AdminTokensController {
  constructor(
    @Inject(CATALOG_STORE) private readonly store: Pick<Store, 'adminTokens'>,
    @Inject(CATALOG_CONFIG) private readonly config: CatalogConfig,
    @Inject(SECRET_BYTES) private readonly randomBytes: (n: number) => Buffer,
  ) {}

  @Post()
  @HttpCode(201)
  @SetMetadata(TOKENS_ROUTE, true)
  async create(@Req() req: IncomingMessage, @Res({ passthrough: true }) res: ServerResponse): Promise<{ token: AdminTokenView; secret: string }> {
    const { name, scopes } = parseTokenSpec(await readCatalogBody(req, this.config.bodyLimitBytes));
    const secret = `llmgw-admin-${this.randomBytes(32).toString('base64url')}`;
    const row = await this.store.adminTokens.create(name, scopes, secretHash(secret));
    res.setHeader('cache-control', 'no-store');
    return { token: view(row), secret };
  }

  @Get()
  @SetMetadata(TOKENS_ROUTE, true)
  async list(): Promise<{ tokens: AdminTokenView[] }> {
    return { tokens: (await this.store.adminTokens.list()).map(view) };
  }

  @Post(':name/revoke')
  @HttpCode(200)
  @SetMetadata(TOKENS_ROUTE, true)
  async revoke(@Param('name') name: string, @Req() req: IncomingMessage): Promise<AdminTokenView> {
    req.resume();
    const row = await this.store.adminTokens.revoke(name);
    if (row === undefined) throw new DomainError(ErrorCode.NotFound, `no admin token named '${name}'`);
    return view(row);
  }
}

/** `{name, scopes}`: scopes a non-empty list of `read`/`write`; `write` brings `read` with it. */
function parseTokenSpec(raw: unknown): { name: string; scopes: AdminScope[] } {
  const problems: Problem[] = [];
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ProblemError('invalid-body', 'expected an object { name, scopes }', [{ path: '', message: 'expected an object { name, scopes }' }]);
  const body = raw as Record<string, unknown>;
  for (const k of Object.keys(body)) if (k !== 'name' && k !== 'scopes') problems.push({ path: k, message: 'unknown field' });
  if (typeof body.name !== 'string' || !API_KEY_NAME_RE.test(body.name)) problems.push({ path: 'name', message: 'required: 1-64 of A-Z a-z 0-9 _ . : -, starting with a letter or digit' });
  const scopes = body.scopes;
  if (!Array.isArray(scopes) || scopes.length === 0 || !scopes.every((s) => (ADMIN_SCOPES as readonly unknown[]).includes(s))) {
    problems.push({ path: 'scopes', message: `required: a non-empty list of ${ADMIN_SCOPES.join(', ')}` });
  }
  if (problems.length > 0) throw new ProblemError('invalid-body', `${problems.length} problem${problems.length === 1 ? '' : 's'}; no token was created`, problems);
  const wanted = new Set(scopes as AdminScope[]);
  return { name: body.name as string, scopes: wanted.has('write') ? ['read', 'write'] : ['read'] };
}

function view(row: AdminTokenRecord): AdminTokenView {
  return {
    name: row.name,
    scopes: [...row.scopes],
    createdAt: new Date(row.createdAt).toISOString(),
    ...(row.revokedAt !== undefined && { revokedAt: new Date(row.revokedAt).toISOString() }),
  };
}
