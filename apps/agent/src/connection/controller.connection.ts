import { Metadata, status, type ClientDuplexStream, type StatusObject } from '@grpc/grpc-js';
import { timerScheduler, type Rng, type Scheduler } from '@llmgw/domain';
import type { AgentServiceClient, ConnectRequest, ConnectResponse, Heartbeat, Register } from '@llmgw/proto';
import { LeaderFollower, type FollowBounds } from '@llmgw/lease';
import { errorMessage, type AgentLogger } from '../runtime/agent.logger';

/** How the agent reaches its controllers. Times in ms. */
export interface ConnectionSettings {
  /** Controller addresses (`host:port`), tried in turn. */
  readonly controllers: readonly string[];
  /** Sent as `authorization: Bearer <token>` call metadata. */
  readonly joinToken?: string;
  readonly reconnect: FollowBounds;
  /** Heartbeat interval when a Welcome names none. */
  readonly defaultHeartbeatMs: number;
  /** A stream that brings neither Welcome nor NotLeader within this long is dropped and retried. */
  readonly welcomeTimeoutMs: number;
}

/** A command from the controller: every ConnectResponse that is not Welcome or NotLeader. */
export type ControllerCommand = Exclude<NonNullable<ConnectResponse['payload']>, { $case: 'welcome' } | { $case: 'notLeader' }>;

/** What the connection asks of the rest of the agent. */
export interface AgentSession {
  /** The Register message for a new stream (hardware, replicas, cache). */
  register(): Promise<Register>;
  /** The next Heartbeat on a stream; `stream` keeps per-stream state (the last cache listing sent). */
  heartbeat(stream: StreamState): Promise<Heartbeat>;
  /** Runs one command; results go out through the connection's `send`. */
  handle(command: ControllerCommand): void;
}

/** Per-stream memory the session may use (reset on every new stream). */
export interface StreamState {
  /** JSON of the cache entries last sent on this stream (Register or a heartbeat listing). */
  lastListing?: string;
}

export interface ConnectionDeps {
  readonly session: AgentSession;
  readonly logger: AgentLogger;
  readonly rng: Rng;
  /** Timers (the reconnect delay, heartbeats, the Welcome deadline); the runtime's by default. */
  readonly scheduler?: Scheduler;
  /** Makes a client for one address (controller.clients.ts). */
  readonly createClient: (address: string) => AgentServiceClient;
  /** The controller refused this agent (bad join token): the agent must stop, not retry. */
  readonly onFatal: (error: JoinRejectedError) => void;
  /** The node secret: sent in every Register, and replaced when a Welcome issues one (first join). */
  readonly identity?: { secret(): string | undefined; save(secret: string): void };
  /** Connected to a leader (after Welcome) or lost it; for readiness. */
  readonly onLeaderChange?: (connected: boolean, address?: string) => void;
}

/** Exit status of an agent a controller refused (EX_CONFIG): the systemd unit does not restart on it. */
export const JOIN_REJECTED_EXIT_CODE = 78;

/** A controller refused the join token (UNAUTHENTICATED) or the node secret (PERMISSION_DENIED). */
export class JoinRejectedError extends Error {
  constructor(
    readonly address: string,
    readonly grpcCode: number,
    details: string,
  ) {
    super(
      `controller ${address} rejected this agent (${status[grpcCode] ?? grpcCode}: ${details || 'no details'}); ` +
        (grpcCode === status.PERMISSION_DENIED
          ? 'the node id is bound to another node secret than the one in the state directory'
          : 'check LLMGW_AGENT_JOIN_TOKEN') +
        ' — the agent stops instead of retrying with credentials that will not work',
    );
    this.name = 'JoinRejectedError';
  }
}

const NONE = (): void => undefined;

/**
 * The agent's end of `AgentService.Connect`. Connects to any controller in the list and moves
 * between them by {@link LeaderFollower}: a NotLeader naming the leader is followed at once,
 * NotLeader answers never grow the delay (a standby answering means a leader is near), and
 * only rounds of the whole list that nobody answered back off exponentially. Each stream opens
 * with Register, then sends a Heartbeat at the interval the Welcome names. A rejected join
 * token stops the connection for good and calls `onFatal`.
 */
export class ControllerConnection {
  private readonly scheduler: Scheduler;
  private readonly clients = new Map<string, AgentServiceClient>();
  private call: ClientDuplexStream<ConnectRequest, ConnectResponse> | undefined;
  private welcomed = false;
  private stopped = true;
  private readonly follower: LeaderFollower;
  /** Cancels the pending reconnect timer (a no-op when none is pending). */
  private cancelReconnect: () => void = NONE;
  /** Cancels the pending heartbeat timer (a no-op when none is pending). */
  private cancelHeartbeat: () => void = NONE;
  /** Cancels the pending welcome timer (a no-op when none is pending). */
  private cancelWelcome: () => void = NONE;

  constructor(
    private readonly settings: ConnectionSettings,
    private readonly deps: ConnectionDeps,
  ) {
    this.follower = new LeaderFollower(settings.controllers, settings.reconnect, deps.rng);
    this.scheduler = deps.scheduler ?? timerScheduler;
  }

  /** True while a leader has welcomed this agent on the current stream. */
  get connected(): boolean {
    return this.call !== undefined && this.welcomed;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.open();
  }

  /** Ends the stream and stops reconnecting. */
  stop(): void {
    this.stopped = true;
    this.cancelReconnect();
    this.cancelHeartbeat();
    this.cancelWelcome();
    const call = this.call;
    this.call = undefined;
    if (call) {
      call.end();
      call.cancel();
    }
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }

  /** Sends a message on the current stream; false (dropped) when there is none. */
  send(message: ConnectRequest): boolean {
    const call = this.call;
    if (!call) return false;
    call.write(message);
    return true;
  }

  private open(): void {
    if (this.stopped) return;
    const address = this.follower.current();
    let client = this.clients.get(address);
    if (!client) {
      client = this.deps.createClient(address);
      this.clients.set(address, client);
    }
    const metadata = new Metadata();
    if (this.settings.joinToken) metadata.set('authorization', `Bearer ${this.settings.joinToken}`);
    const call = client.connect(metadata);
    this.call = call;
    this.welcomed = false;
    const stream: StreamState = {};
    let notLeader: { leaderAddress?: string } | undefined;
    this.deps.logger.debug({ controller: address }, 'connecting to controller');

    call.on('data', (message: ConnectResponse) => {
      if (this.call !== call) return;
      const payload = message.payload;
      if (!payload) return;
      switch (payload.$case) {
        case 'welcome': {
          this.cancelWelcome();
          this.welcomed = true;
          this.follower.connected();
          if (payload.value.nodeSecret !== undefined) this.keepSecret(payload.value.nodeSecret);
          const interval = payload.value.heartbeatIntervalMs > 0 ? payload.value.heartbeatIntervalMs : this.settings.defaultHeartbeatMs;
          this.deps.logger.info({ controller: address, controllerId: payload.value.controllerId, heartbeatMs: interval }, 'connected to the leading controller');
          this.deps.onLeaderChange?.(true, address);
          this.scheduleHeartbeat(call, stream, interval, interval);
          return;
        }
        case 'notLeader':
          this.cancelWelcome();
          notLeader = { ...(payload.value.leaderAddress !== undefined && payload.value.leaderAddress !== '' && { leaderAddress: payload.value.leaderAddress }) };
          call.end();
          return;
        default:
          if (!this.welcomed) this.deps.logger.warn({ controller: address, command: payload.$case }, 'command before Welcome; handling it anyway');
          this.deps.session.handle(payload);
      }
    });
    call.on('error', () => undefined); // every end, error or not, is handled once from 'status'
    call.on('status', (s: StatusObject) => this.onEnd(call, address, s, notLeader));
    this.cancelWelcome = this.scheduler.schedule(this.settings.welcomeTimeoutMs, () => {
      if (this.call !== call || this.welcomed) return;
      this.deps.logger.warn({ controller: address, timeoutMs: this.settings.welcomeTimeoutMs }, 'no Welcome from the controller; reconnecting');
      call.cancel();
    });

    // 1. Register first; the controller answers Welcome or NotLeader.
    this.deps.session.register().then(
      (register) => {
        if (this.call === call) {
          stream.lastListing = JSON.stringify(register.cache?.entries ?? []);
          const secret = this.deps.identity?.secret();
          call.write({ payload: { $case: 'register', value: secret !== undefined ? { ...register, nodeSecret: secret } : register } });
        }
      },
      (error) => {
        this.deps.logger.error({ err: errorMessage(error) }, 'cannot build Register; retrying');
        if (this.call === call) call.cancel();
      },
    );
  }

  private keepSecret(secret: string): void {
    try {
      this.deps.identity?.save(secret);
      this.deps.logger.info({}, 'the controller bound this node id to a new node secret; kept in the state directory');
    } catch (error) {
      // Held in memory still, so this process reconnects; a restart would be refused.
      this.deps.logger.error({ err: errorMessage(error) }, 'cannot keep the node secret; after a restart this node will need `llmgw nodes forget`');
    }
  }

  private onEnd(call: ClientDuplexStream<ConnectRequest, ConnectResponse>, address: string, s: StatusObject, notLeader: { leaderAddress?: string } | undefined): void {
    if (this.call !== call) return;
    this.call = undefined;
    this.cancelHeartbeat();
    this.cancelWelcome();
    const wasWelcomed = this.welcomed;
    this.welcomed = false;
    if (wasWelcomed) this.deps.onLeaderChange?.(false);
    if (this.stopped) return;
    if (s.code === status.UNAUTHENTICATED || s.code === status.PERMISSION_DENIED) {
      const error = new JoinRejectedError(address, s.code, s.details);
      this.deps.logger.error({ controller: address, code: status[s.code] }, error.message);
      this.stop();
      this.deps.onFatal(error);
      return;
    }
    const delay = this.follower.next(notLeader ? { kind: 'notLeader', ...notLeader } : { kind: 'failed' });
    if (notLeader) {
      this.deps.logger.info({ controller: address, leader: notLeader.leaderAddress ?? '-', next: this.follower.current(), delayMs: delay }, 'controller is not the leader');
    } else {
      const level = wasWelcomed ? 'warn' : 'info';
      this.deps.logger[level]({ controller: address, code: status[s.code] ?? s.code, details: s.details, delayMs: delay }, 'controller stream ended; reconnecting');
    }
    this.cancelReconnect = this.scheduler.schedule(delay, () => this.open());
  }

  /** Heartbeats on a fixed cadence: the next is due `interval` after the previous was due. */
  private scheduleHeartbeat(call: ClientDuplexStream<ConnectRequest, ConnectResponse>, stream: StreamState, interval: number, delay: number): void {
    this.cancelHeartbeat = this.scheduler.schedule(delay, () => {
      if (this.call !== call) return;
      const due = performance.now();
      this.deps.session.heartbeat(stream).then(
        (heartbeat) => {
          if (this.call !== call) return;
          call.write({ payload: { $case: 'heartbeat', value: heartbeat } });
          this.scheduleHeartbeat(call, stream, interval, Math.max(0, interval - (performance.now() - due)));
        },
        (error) => {
          this.deps.logger.warn({ err: errorMessage(error) }, 'cannot build heartbeat');
          if (this.call === call) this.scheduleHeartbeat(call, stream, interval, interval);
        },
      );
    });
  }
}
