import type { RouterServiceClient } from '@llmgw/proto';
import { controllerMetadata } from '../watch/controller.metadata';
import type { KeyUsageCount } from './key-usage.tally';
import type { UsageSink } from './usage.sink';

/**
 * {@link UsageSink} over `RouterService.ReportUsage`, each call bounded by `deadlineMs`, sent to
 * whichever controller `client()` gives at that moment (the one the watch follows).
 */
export class GrpcUsageSink implements UsageSink {
  constructor(
    private readonly client: () => RouterServiceClient,
    private readonly routerId: string,
    private readonly deadlineMs: number,
    /** LLMGW_ROUTER_CONTROLLER_TOKEN, sent as `authorization: Bearer`; unset = none sent. */
    private readonly token?: string,
  ) {}

  report(lastUsed: ReadonlyMap<string, number>, keyUsage: readonly KeyUsageCount[] = []): Promise<void> {
    const lastUsedUnixMs: Record<string, number> = {};
    for (const [id, at] of lastUsed) lastUsedUnixMs[id] = at;
    return new Promise((resolve, reject) => {
      this.client().reportUsage(
        {
          routerId: this.routerId,
          lastUsedUnixMs,
          keyUsage: keyUsage.map((k) => ({ key: k.key, model: k.model, hourUnixMs: k.hour, requests: k.requests, promptTokens: k.promptTokens, completionTokens: k.completionTokens })),
        },
        controllerMetadata(this.token),
        { deadline: Date.now() + this.deadlineMs },
        (error) => (error ? reject(error) : resolve()),
      );
    });
  }
}
