import { Metadata } from '@grpc/grpc-js';
import type { RouterServiceClient } from '@llmgw/proto';
import type { UsageSink } from './usage.sink';

/** {@link UsageSink} over `RouterService.ReportUsage`, each call bounded by `deadlineMs`. */
export class GrpcUsageSink implements UsageSink {
  constructor(
    private readonly client: RouterServiceClient,
    private readonly routerId: string,
    private readonly deadlineMs: number,
  ) {}

  report(lastUsed: ReadonlyMap<string, number>): Promise<void> {
    const lastUsedUnixMs: Record<string, number> = {};
    for (const [id, at] of lastUsed) lastUsedUnixMs[id] = at;
    return new Promise((resolve, reject) => {
      this.client.reportUsage(
        { routerId: this.routerId, lastUsedUnixMs },
        new Metadata(),
        { deadline: Date.now() + this.deadlineMs },
        (error) => (error ? reject(error) : resolve()),
      );
    });
  }
}
