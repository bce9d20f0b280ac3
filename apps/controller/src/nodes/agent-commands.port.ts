import type { CollectOutcomeName, Model, ReplicaMember } from '@llmgw/domain';

/** How a command ended: the agent answered, its stream closed first, or the deadline passed first. */
export type CommandOutcome = 'answered' | 'closed' | 'timeout';

/** An agent's answer to a command, or a failure (`ok: false`) made up when it never answered. */
export interface CommandReply {
  readonly ok: boolean;
  readonly message: string;
}

/** Called once per command with its reply and how it ended. */
export type ReplyHandler = (reply: CommandReply, outcome: CommandOutcome) => void;

/** One path an agent was asked to collect, and what it did with it. */
export interface CollectedPath {
  readonly path: string;
  readonly outcome: CollectOutcomeName;
  readonly reason?: string;
}

/** An agent's answer to CollectWeights: one entry per path it looked at. */
export interface CollectReply extends CommandReply {
  readonly paths: readonly CollectedPath[];
}

/** What one member of a replica is started with. */
export interface StartOrder {
  readonly replicaId: string;
  readonly model: Model;
  readonly profileIndex: number;
  readonly member: ReplicaMember;
  readonly members: readonly ReplicaMember[];
  /** A member node's address, for the member list of a multi-node replica. */
  addressOf(nodeId: string): string;
}

/** Why every agent stream is being closed: the lead went elsewhere (agents must follow it), or this controller stops. */
export type CloseReason = 'not-leader' | 'shutdown';

/**
 * What the controller tells agents, in domain terms (owned by its users: the reconciler, the
 * admin service and the leadership term; the gRPC edge implements it). A send to a node with no
 * agent stream returns false, and a handler given with it hears `closed` at once.
 */
export interface AgentCommands {
  /** StartReplica for one member; `onReply` hears the agent's answer. */
  startReplica(nodeId: string, order: StartOrder, onReply?: ReplyHandler): boolean;
  stopReplica(nodeId: string, replicaId: string): boolean;
  /**
   * FetchWeights for the model; false, sending nothing, when its weights need no fetch (a
   * `file://` source is used in place). A node without a stream is told to `onReply` as closed.
   */
  fetchWeights(nodeId: string, model: Model, onReply: ReplyHandler): boolean;
  /** CollectWeights for these cache paths; resolves with the agent's answer, or a failure at the deadline or when the stream ends. */
  collectWeights(nodeId: string, paths: readonly string[], deadlineMs: number): Promise<CollectReply>;
  /** Whether the node has an open agent stream. */
  connected(nodeId: string): boolean;
  /** Closes every agent stream; `not-leader` tells each agent first that this controller no longer leads. */
  closeAll(reason: CloseReason): void;
}

/** Injection token of {@link AgentCommands}. */
export const AGENT_COMMANDS = Symbol('llmgw.controller.agent-commands');
