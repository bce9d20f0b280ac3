// Test-only: a controller speaking AgentService.Connect over a real grpc-js server on 127.0.0.1:0,
// recording what agents send and sending the commands a test asks for.
import { Server, status, type Metadata, type ServerDuplexStream } from '@grpc/grpc-js';
import {
  AgentServiceService,
  type CommandResult,
  type ConnectRequest,
  type ConnectResponse,
  type Heartbeat,
  type Register,
  type ReplicaStatus,
  type UnheardFailures,
} from '@llmgw/proto';
import { testServerCredentials, waitFor } from '@llmgw/testing';

/** How the fake answers a new stream. */
export type FakeControllerMode =
  | { kind: 'leader'; heartbeatIntervalMs: number }
  /** Answers Register with NotLeader (naming `leaderAddress` when given) and ends the stream. */
  | { kind: 'not-leader'; leaderAddress?: string }
  /** Ends every stream at once with this gRPC status (e.g. UNAUTHENTICATED). */
  | { kind: 'reject'; code: status; details: string }
  /** Accepts the stream and Register, and never answers. */
  | { kind: 'silent' };

export interface Received<T> {
  readonly at: number;
  readonly stream: number;
  readonly value: T;
}

export class FakeController {
  readonly registers: Received<Register>[] = [];
  readonly heartbeats: Received<Heartbeat>[] = [];
  readonly statuses: Received<ReplicaStatus>[] = [];
  readonly results: Received<CommandResult>[] = [];
  readonly unheard: Received<UnheardFailures>[] = [];
  /** The `authorization` metadata of every stream opened, in order. */
  readonly authorizations: (string | undefined)[] = [];
  private readonly streams: ServerDuplexStream<ConnectRequest, ConnectResponse>[] = [];
  private nextCommand = 1;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    public mode: FakeControllerMode,
    readonly requiredToken: string | undefined,
  ) {}

  /** Listens on 127.0.0.1:0. With `requiredToken`, a stream without `Bearer <token>` is refused UNAUTHENTICATED. */
  static async start(mode: FakeControllerMode, requiredToken?: string): Promise<FakeController> {
    const server = new Server();
    const ref: { fake?: FakeController } = {};
    server.addService(AgentServiceService, {
      connect: (call: ServerDuplexStream<ConnectRequest, ConnectResponse>) => ref.fake?.onStream(call),
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', testServerCredentials(), (error, p) => (error ? reject(error) : resolve(p))),
    );
    ref.fake = new FakeController(server, port, mode, requiredToken);
    return ref.fake;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Streams opened so far (connection attempts that reached this controller). */
  get streamCount(): number {
    return this.streams.length;
  }

  /** Sends a command on the newest stream; returns its command id. */
  send(payload: Exclude<ConnectResponse['payload'], undefined>): string {
    const stream = this.streams[this.streams.length - 1];
    if (!stream) throw new Error('no agent stream');
    const commandId = `cmd-${this.nextCommand++}`;
    const value = { ...payload.value, commandId } as never;
    stream.write({ payload: { $case: payload.$case, value } as ConnectResponse['payload'] });
    return commandId;
  }

  /** Waits for the CommandResult of `commandId`. */
  result(commandId: string, deadlineMs = 30_000): Promise<CommandResult> {
    return waitFor(() => this.results.find((r) => r.value.commandId === commandId)?.value, {
      deadlineMs,
      message: `CommandResult ${commandId}`,
    });
  }

  /** Waits for a ReplicaStatus of `replicaId` matching `match`, after `since` statuses were seen. */
  status(replicaId: string, match: (s: ReplicaStatus) => boolean, options: { deadlineMs?: number; since?: number } = {}): Promise<ReplicaStatus> {
    return waitFor(
      () =>
        this.statuses
          .slice(options.since ?? 0)
          .map((s) => s.value)
          .find((s) => s.replicaId === replicaId && match(s)),
      { deadlineMs: options.deadlineMs ?? 30_000, message: `ReplicaStatus of ${replicaId}; seen ${JSON.stringify(this.statuses.map((s) => [s.value.state, s.value.reason]))}` },
    );
  }

  /** Ends every open stream with `code` (a controller shutting down ends its streams UNAVAILABLE). */
  dropStreams(code: status = status.UNAVAILABLE): void {
    for (const s of this.streams) s.emit('error', { code, details: 'controller going away' });
  }

  async stop(): Promise<void> {
    for (const s of this.streams) s.destroy();
    await new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
    this.server.forceShutdown();
  }

  private onStream(call: ServerDuplexStream<ConnectRequest, ConnectResponse>): void {
    const index = this.streams.length;
    this.streams.push(call);
    this.authorizations.push(headerOf(call.metadata));
    call.on('error', () => undefined);
    const mode = this.mode;
    if (this.requiredToken !== undefined && headerOf(call.metadata) !== `Bearer ${this.requiredToken}`) {
      call.emit('error', { code: status.UNAUTHENTICATED, details: 'join token not accepted' });
      return;
    }
    if (mode.kind === 'reject') {
      call.emit('error', { code: mode.code, details: mode.details });
      return;
    }
    call.on('data', (message: ConnectRequest) => {
      const payload = message.payload;
      if (!payload) return;
      const at = performance.now();
      switch (payload.$case) {
        case 'register':
          this.registers.push({ at, stream: index, value: payload.value });
          if (mode.kind === 'silent') return;
          if (mode.kind === 'not-leader') {
            call.write({ payload: { $case: 'notLeader', value: mode.leaderAddress ? { leaderAddress: mode.leaderAddress } : {} } });
            call.end();
          } else if (mode.kind === 'leader') {
            call.write({ payload: { $case: 'welcome', value: { heartbeatIntervalMs: mode.heartbeatIntervalMs, controllerId: `fake-${this.port}` } } });
          }
          return;
        case 'heartbeat':
          this.heartbeats.push({ at, stream: index, value: payload.value });
          return;
        case 'replicaStatus':
          this.statuses.push({ at, stream: index, value: payload.value });
          return;
        case 'commandResult':
          this.results.push({ at, stream: index, value: payload.value });
          return;
        case 'unheardFailures':
          this.unheard.push({ at, stream: index, value: payload.value });
          return;
      }
    });
    call.on('end', () => call.end());
  }
}

function headerOf(metadata: Metadata): string | undefined {
  const value = metadata.get('authorization')[0];
  return value === undefined ? undefined : String(value);
}
