import { Writable } from 'node:stream';
import { Logger as NestLogger } from '@nestjs/common';
import { describe, expect, it } from 'vitest';
import { createLogger, REDACTED, redactSecrets } from './logger.factory';
import { PinoNestLogger } from './nest-logger.adapter';

function collectingLogger(level: 'info' | 'debug' | 'trace' = 'info') {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: createLogger({ name: 'llmgw-test', level, destination }), lines };
}

describe('createLogger', () => {
  it('writes one JSON object per line with time, level word, name, context and fields', () => {
    const { logger, lines } = collectingLogger();
    logger.child({ context: 'ReplicaService' }).info({ replicaId: 'r-1' }, 'replica started');
    logger.debug('not at info');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'info',
      name: 'llmgw-test',
      context: 'ReplicaService',
      replicaId: 'r-1',
      msg: 'replica started',
    });
    expect(new Date(lines[0]['time'] as string).toISOString()).toBe(lines[0]['time']);
  });

  it('never writes secrets, at any depth, but keeps token counts', () => {
    const { logger, lines } = collectingLogger();
    const headers = { authorization: 'Bearer sk-abc', 'x-api-key': 'k-1', accept: 'json' };
    logger.info(
      {
        req: { headers },
        token: 't-1',
        accessToken: 't-2',
        nested: { deeper: { password: 'p', apiKey: 'k-2', client_secret: 's' } },
        usage: { promptTokens: 12, max_tokens: 64 },
        list: [{ Authorization: 'Basic xyz' }],
      },
      'request',
    );
    const text = JSON.stringify(lines[0]);
    for (const secret of ['sk-abc', 'k-1', 't-1', 't-2', '"p"', 'k-2', '"s"', 'xyz']) expect(text).not.toContain(secret);
    expect(lines[0]).toMatchObject({
      req: { headers: { authorization: REDACTED, 'x-api-key': REDACTED, accept: 'json' } },
      token: REDACTED,
      nested: { deeper: { password: REDACTED, apiKey: REDACTED, client_secret: REDACTED } },
      usage: { promptTokens: 12, max_tokens: 64 },
      list: [{ Authorization: REDACTED }],
    });
    // The caller's object is not modified.
    expect(headers.authorization).toBe('Bearer sk-abc');
  });

  it('redactSecrets survives cycles and leaves errors to the error serializer', () => {
    const cyclic: Record<string, unknown> = { token: 'x' };
    cyclic['self'] = cyclic;
    const error = new Error('boom');
    const out = redactSecrets({ cyclic, err: error }) as { cyclic: { token: string }; err: Error };
    expect(out.cyclic.token).toBe(REDACTED);
    expect(out.err).toBe(error);
  });
});

describe('PinoNestLogger', () => {
  it('routes Nest loggers into pino with their context', () => {
    const { logger, lines } = collectingLogger('trace');
    const adapter = new PinoNestLogger(logger);
    NestLogger.overrideLogger(adapter);
    try {
      new NestLogger('CatalogService').log('catalog swapped');
      new NestLogger('CatalogService').log({ msg: 'revision', revision: 7 });
      new NestLogger('Reconciler').error('tick failed', 'Error: x\n    at y', );
      adapter.error(new Error('store down'), 'StoreHealth');
      adapter.warn('slow scrape', { endpoint: 'e1' }, 'Scraper');
      adapter.verbose('per request', 'Picker');
    } finally {
      NestLogger.overrideLogger(true);
    }
    expect(lines[0]).toMatchObject({ level: 'info', context: 'CatalogService', msg: 'catalog swapped' });
    expect(lines[1]).toMatchObject({ level: 'info', context: 'CatalogService', msg: 'revision', revision: 7 });
    expect(lines[2]).toMatchObject({ level: 'error', context: 'Reconciler', msg: 'tick failed', stack: 'Error: x\n    at y' });
    expect(lines[3]).toMatchObject({ level: 'error', context: 'StoreHealth', msg: 'store down', err: { message: 'store down' } });
    expect(lines[4]).toMatchObject({ level: 'warn', context: 'Scraper', msg: 'slow scrape', extra: [{ endpoint: 'e1' }] });
    expect(lines[5]).toMatchObject({ level: 'trace', context: 'Picker', msg: 'per request' });
  });
});
