import { Controller, Get, HttpCode, Inject, Param, Patch, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CATALOG_CONFIG, type CatalogConfig } from '../config/catalog.config';
import { AdminTokenGuard } from '../api/admin-token.guard';
import { readCatalogBody } from '../api/catalog-body.reader';
import { parseIfMatch, revisionTag } from '../api/entity-tag.parser';
import { KeysApiService, type KeyView } from './keys-api.service';

/**
 * API keys under `/v1/keys`, behind the admin token, beside the catalog: JSON or YAML bodies,
 * problem+json errors, a revision per key as its `ETag`, `If-Match` honoured on changes. The
 * secret is in the creation answer only. Transport only: the rules live in KeysApiService.
 */
@Controller('v1/keys')
@UseGuards(AdminTokenGuard)
export class KeysApiController {
  constructor(
    private readonly service: KeysApiService,
    @Inject(CATALOG_CONFIG) private readonly config: CatalogConfig,
  ) {}

  @Post()
  @HttpCode(201)
  async create(@Req() req: IncomingMessage, @Res({ passthrough: true }) res: ServerResponse): Promise<{ key: KeyView; secret: string }> {
    const created = await this.service.create(await readCatalogBody(req, this.config.bodyLimitBytes));
    noStore(res).setHeader('etag', revisionTag(created.key.revision));
    res.setHeader('location', `/v1/keys/${encodeURIComponent(created.key.name)}`);
    return created;
  }

  @Get()
  async list(@Res({ passthrough: true }) res: ServerResponse): Promise<{ keys: KeyView[] }> {
    noStore(res);
    return this.service.list();
  }

  @Get(':name')
  async get(@Param('name') name: string, @Res({ passthrough: true }) res: ServerResponse): Promise<KeyView> {
    return tagged(res, await this.service.get(name));
  }

  @Patch(':name')
  async update(@Param('name') name: string, @Req() req: IncomingMessage, @Res({ passthrough: true }) res: ServerResponse): Promise<KeyView> {
    const ifMatch = parseIfMatch(req.headers['if-match']);
    const body = await readCatalogBody(req, this.config.bodyLimitBytes);
    return tagged(res, await this.service.update(name, body, ifMatch));
  }

  @Post(':name/revoke')
  @HttpCode(200)
  async revoke(@Param('name') name: string, @Req() req: IncomingMessage, @Res({ passthrough: true }) res: ServerResponse): Promise<KeyView> {
    req.resume();
    return tagged(res, await this.service.revoke(name));
  }
}

function noStore(res: ServerResponse): ServerResponse {
  res.setHeader('cache-control', 'no-store');
  return res;
}

function tagged(res: ServerResponse, key: KeyView): KeyView {
  noStore(res).setHeader('etag', revisionTag(key.revision));
  return key;
}
