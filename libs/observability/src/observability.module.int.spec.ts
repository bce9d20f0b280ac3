import { Injectable, Module, type INestApplication, type OnModuleInit } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from './logger.factory';
import { createMetricsRegistry } from './metrics.registry';
import { PinoNestLogger } from './nest-logger.adapter';
import { ObservabilityModule } from './observability.module';
import { ReadinessService, type ReadinessGate } from './readiness.service';

@Injectable()
class SnapshotFeature implements OnModuleInit {
  gate!: ReadinessGate;
  storeUp = true;

  constructor(private readonly readiness: ReadinessService) {}

  onModuleInit(): void {
    this.gate = this.readiness.gate('snapshot', 'no snapshot received yet');
    this.readiness.register('store', () => ({ ready: this.storeUp, reason: 'store unreachable' }));
  }
}

const silent = new Writable({ write: (_c, _e, done) => done() });

@Module({
  imports: [ObservabilityModule.forRoot({ logger: createLogger({ name: 't', level: 'silent', destination: silent }), registry: createMetricsRegistry() })],
  providers: [SnapshotFeature],
})
class TestAppModule {}

describe('ObservabilityModule', () => {
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  async function start(): Promise<string> {
    app = await NestFactory.create(TestAppModule, new ExpressAdapter(), {
      logger: new PinoNestLogger(createLogger({ name: 't', level: 'silent', destination: silent })),
    });
    await app.listen(0, '127.0.0.1');
    return `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  }

  it('answers /healthz, and /readyz 503 until every named check passes', async () => {
    const base = await start();
    const feature = (app as INestApplication).get(SnapshotFeature);

    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });

    let ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({
      status: 'not_ready',
      checks: { snapshot: { ready: false, reason: 'no snapshot received yet' }, store: { ready: true } },
    });

    feature.gate.open();
    ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { snapshot: { ready: true }, store: { ready: true } } });

    feature.storeUp = false;
    ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { checks: Record<string, unknown> }).checks['store']).toEqual({ ready: false, reason: 'store unreachable' });

    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(await metrics.text()).toContain('process_cpu_seconds_total');
  });

  it('reports not ready once shutdown begins', async () => {
    await start();
    const readiness = (app as INestApplication).get(ReadinessService);
    (app as INestApplication).get(SnapshotFeature).gate.open();
    expect((await readiness.evaluate()).ready).toBe(true);
    readiness.beforeApplicationShutdown();
    expect(await readiness.evaluate()).toMatchObject({ ready: false, checks: { shutdown: { ready: false, reason: 'shutting down' } } });
  });
});

describe('ReadinessService', () => {
  it('counts a throwing or hanging check as not ready, naming why', async () => {
    const readiness = new ReadinessService();
    readiness.register('throws', () => {
      throw new Error('connection refused');
    });
    readiness.register('hangs', () => new Promise<boolean>(() => undefined));
    readiness.register('false', () => false);
    const report = await readiness.evaluate();
    expect(report).toEqual({
      ready: false,
      checks: {
        throws: { ready: false, reason: 'connection refused' },
        hangs: { ready: false, reason: 'no answer within 2000 ms' },
        false: { ready: false, reason: 'not ready' },
      },
    });
  });

  it("passes a check's detail through, ready or not", async () => {
    const readiness = new ReadinessService();
    let up = true;
    readiness.register('controller', () => ({ ready: up, reason: 'no controller', detail: { connected: false, staleSeconds: 12.5, controller: '10.0.0.2:8082' } }));
    expect(await readiness.evaluate()).toEqual({ ready: true, checks: { controller: { ready: true, detail: { connected: false, staleSeconds: 12.5, controller: '10.0.0.2:8082' } } } });
    up = false;
    expect((await readiness.evaluate()).checks['controller']).toEqual({ ready: false, reason: 'no controller', detail: { connected: false, staleSeconds: 12.5, controller: '10.0.0.2:8082' } });
  });

  it('refuses a name registered twice and is ready with no checks', async () => {
    const readiness = new ReadinessService();
    expect(await readiness.evaluate()).toEqual({ ready: true, checks: {} });
    readiness.register('a', () => true);
    expect(() => readiness.register('a', () => true)).toThrow('readiness check "a" is already registered');
  });
});
