import { randomUUID } from 'node:crypto';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { CommandResult, ConnectRequest, ConnectResponse } from '@llmgw/proto';
import type { Logger } from 'pino';

/** A command the controller sends, by its oneof case (without `commandId`, which is filled in). */
export type AgentCommand =
  | { readonly $case: 'startReplica'; readonly value: Omit<Extract<ConnectResponse['payload'], { $case: 'startReplica' }>['value'], 'commandId'> }
  | { readonly $case: 'stopReplica'; readonly value: Omit<Extract<ConnectResponse['payload'], { $case: 'stopReplica' }>['value'], 'commandId'> }
  | { readonly $case: 'fetchWeights'; readonly value: Omit<Extract<ConnectResponse['payload'], { $case: 'fetchWeights' }>['value'], 'commandId'> }
  | { readonly $case: 'collectWeights'; readonly value: Omit<Extract<ConnectResponse['payload'], { $case: 'collectWeights' }>['value'], 'commandId'> };

/** How a command ended: the agent answered, its stream closed first, or the deadline passed first. */
export type CommandOutcome = 'answered' | 'closed' | 'timeout';

/** Called once with the agent's CommandResult, or a synthesised failure (`ok: false`) when it never answered. */
export type ResultHandler = (result: CommandResult, outcome: CommandOutcome) => void;

interface Pending {
  readonly handler: ResultHandler;
  readonly timer?: NodeJS.Timeout;
}

/** One agent's open stream: writes commands and matches CommandResults to them by id. */
export class AgentSession {
  private readonly pending = new Map<string, Pending>();
  private closedValue = false;

  constructor(
    readonly nodeId: string,
    private readonly call: ServerDuplexStream<ConnectRequest, ConnectResponse>,
  ) {}

  get closed(): boolean {
    return this.closedValue || this.call.cancelled || this.call.destroyed || this.call.writableEnded;
  }

  /** Writes a command; returns its id, or undefined when the stream is closed. `onResult` may be given a deadline. */
  send(command: AgentCommand, onResult?: ResultHandler, deadlineMs?: number): string | undefined {
    if (this.closed) return undefined;
    const commandId = randomUUID();
    if (onResult) {
      const timer =
        deadlineMs === undefined
          ? undefined
          : setTimeout(() => this.settle(commandId, { commandId, ok: false, message: `no answer within ${deadlineMs} ms`, paths: [] }, 'timeout'), deadlineMs);
      timer?.unref();
      this.pending.set(commandId, { handler: onResult, ...(timer ? { timer } : {}) });
    }
    this.call.write({ payload: { $case: command.$case, value: { ...command.value, commandId } } as ConnectResponse['payload'] });
    return commandId;
  }

  /** Writes a non-command message (Welcome, NotLeader). */
  write(payload: ConnectResponse['payload']): void {
    if (!this.closed) this.call.write({ payload });
  }

  /** An agent's CommandResult; unknown ids (commands sent without a handler) are ignored. */
  result(result: CommandResult): void {
    this.settle(result.commandId, result, 'answered');
  }

  /** Ends the stream (after an optional last message); every command still waiting fails. */
  close(last?: ConnectResponse['payload']): void {
    if (!this.closedValue) {
      this.closedValue = true;
      try {
        if (last && !this.call.writableEnded) this.call.write({ payload: last });
        if (!this.call.writableEnded) this.call.end();
      } catch {
        // the stream is already gone
      }
    }
    for (const id of [...this.pending.keys()]) this.settle(id, { commandId: id, ok: false, message: 'agent stream closed', paths: [] }, 'closed');
  }

  private settle(commandId: string, result: CommandResult, outcome: CommandOutcome): void {
    const p = this.pending.get(commandId);
    if (!p) return;
    this.pending.delete(commandId);
    if (p.timer) clearTimeout(p.timer);
    p.handler(result, outcome);
  }
}

/**
 * The open agent streams by node id (one per node: a newer stream replaces the older one).
 * Counts every start and stop command sent, for tests and metrics.
 */
export class AgentSessions {
  private readonly sessions = new Map<string, AgentSession>();
  /** Commands written, by kind. */
  readonly sent: Record<AgentCommand['$case'], number> = { startReplica: 0, stopReplica: 0, fetchWeights: 0, collectWeights: 0 };

  constructor(private readonly logger: Logger) {}

  /** Makes `session` the node's stream, closing an older one. */
  attach(session: AgentSession): void {
    const old = this.sessions.get(session.nodeId);
    this.sessions.set(session.nodeId, session);
    if (old && old !== session) {
      this.logger.info({ nodeId: session.nodeId }, 'agent opened a new stream; closing the old one');
      old.close();
    }
  }

  /** Forgets `session` if it is still the node's stream; returns whether it was. */
  detach(session: AgentSession): boolean {
    if (this.sessions.get(session.nodeId) !== session) return false;
    this.sessions.delete(session.nodeId);
    return true;
  }

  get(nodeId: string): AgentSession | undefined {
    const s = this.sessions.get(nodeId);
    return s && !s.closed ? s : undefined;
  }

  /** Sends to the node's stream; undefined when it has none. */
  send(nodeId: string, command: AgentCommand, onResult?: ResultHandler, deadlineMs?: number): string | undefined {
    const session = this.get(nodeId);
    const id = session?.send(command, onResult, deadlineMs);
    if (id !== undefined) this.sent[command.$case] += 1;
    else if (onResult) onResult({ commandId: '', ok: false, message: `node ${nodeId} has no agent stream`, paths: [] }, 'closed');
    return id;
  }

  /** Sends and waits for the result (or a failure at the deadline / when the stream ends). */
  request(nodeId: string, command: AgentCommand, deadlineMs: number): Promise<CommandResult> {
    return new Promise((resolve) => this.send(nodeId, command, resolve, deadlineMs));
  }

  /** Closes every stream, each after `last` (NotLeader when leadership is lost, nothing at shutdown). */
  closeAll(last?: ConnectResponse['payload']): void {
    for (const s of this.sessions.values()) s.close(last);
    this.sessions.clear();
  }

  get size(): number {
    return this.sessions.size;
  }
}
