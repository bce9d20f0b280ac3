import { Controller, Get, HttpException, Module, Param, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { DomainError, ErrorCode, HTTP_STATUS_OF } from '@llmgw/domain';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from './logger.factory';
import { createMetricsRegistry } from './metrics.registry';
import { ObservabilityModule } from './observability.module';
import { KIND_OF_CODE, PROBLEM_KINDS, problemFilterProvider, ProblemError, statusOfKind, type ProblemKind } from './problem.filter';

class AppSpecificError extends Error {}

const logged: string[] = [];
const sink = new Writable({
  write: (chunk: Buffer, _e, done) => {
    logged.push(chunk.toString());
    done();
  },
});

@Controller()
class ThrowingController {
  @Get('code/:code')
  code(@Param('code') code: string): never {
    throw new DomainError(code as ErrorCode, `failed with ${code}\nsecond line stays out`);
  }

  @Get('kind/:kind')
  kind(@Param('kind') kind: string): never {
    throw new ProblemError(kind as ProblemKind, `refused as ${kind}`, [{ path: 'a.b', message: 'bad' }], { currentRevision: 7, headers: { etag: '"7"' } });
  }

  @Get('http/:status')
  http(@Param('status') status: string): never {
    throw new HttpException({ message: 'nest refused', problems: [{ path: 'x', message: 'y' }] }, Number(status));
  }

  @Get('refined')
  refined(): never {
    throw new AppSpecificError('app-specific');
  }

  @Get('crash')
  crash(): never {
    throw new Error('secret internals at /srv/x.ts:12');
  }
}

@Module({
  imports: [ObservabilityModule.forRoot({ logger: createLogger({ name: 't', level: 'info', destination: sink }), registry: createMetricsRegistry() })],
  controllers: [ThrowingController],
  providers: [
    problemFilterProvider({
      context: 'TestApi',
      realm: 'test-realm',
      refine: (error) => (error instanceof AppSpecificError ? new ProblemError('invalid-catalog', error.message) : undefined),
    }),
  ],
})
class TestModule {}

describe('the REST problem filter', () => {
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    app = await NestFactory.create(TestModule, new ExpressAdapter(), { logger: false });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await app.close();
  });

  async function get(path: string) {
    const res = await fetch(`${base}${path}`);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(res.headers.get('cache-control')).toBe('no-store');
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  }

  it.each(Object.values(ErrorCode).filter((c) => c !== ErrorCode.Internal))('answers domain code %s with its one status, kind and code', async (code) => {
    const r = await get(`/code/${code}`);
    expect(r.status).toBe(HTTP_STATUS_OF[code]);
    expect(r.body).toEqual({
      type: `https://llmgw.dev/problems/${KIND_OF_CODE[code]}`,
      title: PROBLEM_KINDS[KIND_OF_CODE[code]].title,
      status: HTTP_STATUS_OF[code],
      detail: `failed with ${code}`,
      code,
      problems: [],
    });
    expect(r.headers.get('www-authenticate')).toBe(r.status === 401 ? 'Bearer realm="test-realm"' : null);
    expect(r.headers.get('retry-after')).toBe(r.status === 503 ? '1' : null);
  });

  it('maps every code to a kind of that code, so the table and the kinds cannot drift apart', () => {
    for (const code of Object.values(ErrorCode)) {
      expect(PROBLEM_KINDS[KIND_OF_CODE[code]].code).toBe(code);
      expect(statusOfKind(KIND_OF_CODE[code])).toBe(HTTP_STATUS_OF[code]);
    }
  });

  it.each(Object.keys(PROBLEM_KINDS).filter((k) => k !== 'internal') as ProblemKind[])('answers a ProblemError of kind %s with its status, code, problems and extras', async (kind) => {
    const r = await get(`/kind/${kind}`);
    expect(r.status).toBe(statusOfKind(kind));
    expect(r.body).toEqual({
      type: `https://llmgw.dev/problems/${kind}`,
      title: PROBLEM_KINDS[kind].title,
      status: statusOfKind(kind),
      detail: `refused as ${kind}`,
      code: PROBLEM_KINDS[kind].code,
      problems: [{ path: 'a.b', message: 'bad' }],
      currentRevision: 7,
    });
    expect(r.headers.get('etag')).toBe('"7"');
  });

  it('answers Nest HTTP errors and unknown routes with their status, keeping their problems', async () => {
    expect(await get('/http/422')).toMatchObject({ status: 422, body: { type: 'https://llmgw.dev/problems/invalid-body', code: 'invalid_argument', problems: [{ path: 'x', message: 'y' }] } });
    expect(await get('/http/418')).toMatchObject({ status: 418, body: { status: 418, title: 'Request refused', code: 'invalid_argument' } });
    expect(await get('/nowhere')).toMatchObject({ status: 404, body: { type: 'https://llmgw.dev/problems/not-found', code: 'not_found' } });
  });

  it("gives an app's own errors the kind its refine names", async () => {
    expect(await get('/refined')).toMatchObject({ status: 422, body: { type: 'https://llmgw.dev/problems/invalid-catalog', detail: 'app-specific' } });
  });

  it('answers anything else with a 500 naming an error id, logged with its cause and never shown', async () => {
    const r = await get('/crash');
    expect(r.status).toBe(500);
    expect(r.body).toMatchObject({ code: 'internal', errorId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(JSON.stringify(r.body)).not.toContain('secret internals');
    expect(logged.some((line) => line.includes(r.body.errorId as string) && line.includes('secret internals'))).toBe(true);
  });
});
