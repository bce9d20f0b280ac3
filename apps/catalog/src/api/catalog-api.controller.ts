import { Controller, Delete, Get, HttpCode, Inject, Param, Post, Put, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CATALOG_CONFIG, type CatalogConfig } from '../config/catalog.config';
import { AdminTokenGuard } from './admin-token.guard';
import { CatalogApiService, type CatalogView, type ModelView, type RevisionSummary, type ValidationReport } from './catalog-api.service';
import { readCatalogBody } from './catalog-body.reader';
import { parseIfMatch, revisionTag } from './entity-tag.parser';
import { ProblemError, ReadOnlyRoute } from '@llmgw/observability';

/** Header naming who made a change, stored with the revision; default `admin`. */
export const AUTHOR_HEADER = 'llmgw-author';
const DEFAULT_AUTHOR = 'admin';
const MAX_REVISIONS_LISTED = 1000;

/**
 * The catalog REST API under `/v1/catalog`, behind the admin token. Bodies are JSON or YAML by
 * Content-Type; every answer carries the revision it reflects as a strong `ETag`; writes honour
 * `If-Match`. Transport only: the rules live in {@link CatalogApiService}.
 */
@Controller('v1/catalog')
@UseGuards(AdminTokenGuard)
export class CatalogApiController {
  constructor(
    private readonly service: CatalogApiService,
    @Inject(CATALOG_CONFIG) private readonly config: CatalogConfig,
  ) {}

  @Get()
  async get(@Res({ passthrough: true }) res: ServerResponse): Promise<CatalogView> {
    return tagged(res, await this.service.read());
  }

  @Put()
  async replace(@Req() req: IncomingMessage, @Res({ passthrough: true }) res: ServerResponse): Promise<CatalogView> {
    const ifMatch = parseIfMatch(req.headers['if-match']);
    const author = authorOf(req);
    const document = await readCatalogBody(req, this.config.bodyLimitBytes);
    return tagged(res, await this.service.replace(document, ifMatch, author));
  }

  @Post('validate')
  @HttpCode(200)
  @ReadOnlyRoute()
  async validate(@Req() req: IncomingMessage): Promise<ValidationReport> {
    let document: unknown;
    try {
      document = await readCatalogBody(req, this.config.bodyLimitBytes);
    } catch (error) {
      // A body that cannot be parsed is a dry run's answer too; size and media type stay errors.
      if (error instanceof ProblemError && error.kind === 'unparseable-body') {
        return { valid: false, problems: error.problems.length > 0 ? [...error.problems] : [{ path: '', message: error.detail }] };
      }
      throw error;
    }
    return this.service.validate(document);
  }

  @Get('models/:name')
  async getModel(@Param('name') name: string, @Res({ passthrough: true }) res: ServerResponse): Promise<ModelView> {
    return tagged(res, await this.service.getModel(name));
  }

  @Put('models/:name')
  async putModel(@Param('name') name: string, @Req() req: IncomingMessage, @Res({ passthrough: true }) res: ServerResponse): Promise<ModelView> {
    const ifMatch = parseIfMatch(req.headers['if-match']);
    const author = authorOf(req);
    const body = await readCatalogBody(req, this.config.bodyLimitBytes);
    const { created, ...result } = await this.service.putModel(name, body, ifMatch, author);
    res.statusCode = created ? 201 : 200;
    return tagged(res, result);
  }

  @Delete('models/:name')
  async deleteModel(@Param('name') name: string, @Req() req: IncomingMessage, @Res({ passthrough: true }) res: ServerResponse): Promise<{ revision: number; deleted: string }> {
    const ifMatch = parseIfMatch(req.headers['if-match']);
    return tagged(res, await this.service.deleteModel(name, ifMatch, authorOf(req)));
  }

  @Get('revisions')
  async revisions(@Query('limit') limit: string | undefined): Promise<{ currentRevision: number; revisions: RevisionSummary[] }> {
    return this.service.revisions(limit === undefined ? 50 : wholeNumber('limit', limit, 1, MAX_REVISIONS_LISTED));
  }

  @Get('revisions/:revision')
  async revision(@Param('revision') revision: string, @Res({ passthrough: true }) res: ServerResponse): Promise<CatalogView & { author: string; createdAt: string }> {
    const row = await this.service.revision(wholeNumber('revision', revision, 1, Number.MAX_SAFE_INTEGER));
    res.setHeader('cache-control', 'no-store');
    return row;
  }

  @Post('revisions/:revision/restore')
  @HttpCode(200)
  async restore(@Param('revision') revision: string, @Req() req: IncomingMessage, @Res({ passthrough: true }) res: ServerResponse): Promise<CatalogView & { restoredFrom: number }> {
    const n = wholeNumber('revision', revision, 1, Number.MAX_SAFE_INTEGER);
    const ifMatch = parseIfMatch(req.headers['if-match']);
    // Nothing to read, but a client may send a body: drain it so the connection stays usable.
    req.resume();
    return tagged(res, await this.service.restore(n, ifMatch, authorOf(req)));
  }
}

/** Sets `ETag` to the answer's revision; `Cache-Control: no-store` since any write changes it. */
function tagged<T extends { revision: number }>(res: ServerResponse, body: T): T {
  res.setHeader('etag', revisionTag(body.revision));
  res.setHeader('cache-control', 'no-store');
  return body;
}

function authorOf(req: IncomingMessage): string {
  const raw = req.headers[AUTHOR_HEADER];
  if (raw === undefined) return DEFAULT_AUTHOR;
  const text = Array.isArray(raw) ? raw.join(',') : raw;
  if (!/^[\x20-\x7e]{1,128}$/.test(text) || text.trim() === '') {
    throw new ProblemError('bad-request', `${AUTHOR_HEADER} must be 1 to 128 printable ASCII characters`, [
      { path: AUTHOR_HEADER, message: 'must be 1 to 128 printable ASCII characters' },
    ]);
  }
  return text.trim();
}

function wholeNumber(name: string, raw: string, min: number, max: number): number {
  const n = /^\d{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ProblemError('bad-request', `${name} must be a whole number from ${min} to ${max} (got ${JSON.stringify(raw)})`, [
      { path: name, message: `must be a whole number from ${min} to ${max}` },
    ]);
  }
  return n;
}
