import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { metricsHandler } from './metrics.registry';
import { ReadinessService, type CheckState } from './readiness.service';

/** Injection token of the app's prom-client Registry. */
export const METRICS_REGISTRY = Symbol('llmgw.metrics-registry');

/**
 * The operational endpoints every llmgw server has: `GET /healthz` (liveness: 200 while the
 * process serves), `GET /readyz` (200 when every readiness check passes, else 503 with the
 * failing checks), `GET /metrics` (Prometheus text).
 */
@Controller()
export class HealthController {
  private readonly serveMetrics: (req: IncomingMessage, res: ServerResponse) => Promise<void>;

  constructor(
    private readonly readiness: ReadinessService,
    @Inject(METRICS_REGISTRY) registry: Registry,
  ) {
    this.serveMetrics = metricsHandler(registry);
  }

  @Get('healthz')
  healthz(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('readyz')
  async readyz(
    @Res({ passthrough: true }) res: ServerResponse,
  ): Promise<{ status: 'ready' | 'not_ready'; checks: Record<string, CheckState> }> {
    const report = await this.readiness.evaluate();
    res.statusCode = report.ready ? 200 : 503;
    return { status: report.ready ? 'ready' : 'not_ready', checks: report.checks };
  }

  @Get('metrics')
  async metrics(@Req() req: IncomingMessage, @Res() res: ServerResponse): Promise<void> {
    await this.serveMetrics(req, res);
  }
}
