import type { Heartbeat, Register } from '@llmgw/proto';
import type { AgentSession, ControllerCommand, ControllerConnection, StreamState } from '../connection/controller.connection';
import {
  cacheEntryToWire,
  commandResultMessage,
  gpuStateToWire,
  gpuToWire,
  replicaSpecFromWire,
  replicaStatusMessage,
  replicaStatusToWire,
  supervisedToWire,
} from '../connection/proto.mapper';
import type { NodeInventory } from '../discovery/discovery.service';
import type { SupervisorService } from '../supervision/supervisor.service';
import type { WeightsCollector } from '../weights/weights.collector';
import type { WeightsFetcher } from '../weights/weights.fetcher';
import { errorMessage, type AgentLogger } from './agent.logger';
import { UnheardFailures } from './unheard-failures.buffer';

/** Who this node says it is. */
export interface AgentIdentity {
  readonly nodeId: string;
  /** Host or IP routers use to reach this node's engines. */
  readonly address: string;
  /** Build version for diagnostics; empty when unknown. */
  readonly agentVersion: string;
}

export interface AgentRuntimeDeps {
  readonly identity: AgentIdentity;
  readonly discovery: { discover(): Promise<NodeInventory> };
  readonly supervisor: SupervisorService;
  readonly fetcher: WeightsFetcher;
  readonly collector: WeightsCollector;
  readonly logger: AgentLogger;
  /** Wall clock, ms since the epoch (when an unheard failure happened). */
  readonly now: () => number;
}

/**
 * The agent's side of the controller stream: what it registers and reports, and what it does
 * with each command. Every command gets exactly one CommandResult; replica state changes go out
 * as ReplicaStatus as they happen while a leader listens. A failure while none does is kept and
 * sent in one UnheardFailures message after the next Welcome; other changes then need no report,
 * since Register lists every replica as it stands. Engines are never stopped by the agent stopping.
 */
export class AgentRuntime implements AgentSession {
  private connection: ControllerConnection | undefined;
  private readonly unheard = new UnheardFailures();

  constructor(private readonly deps: AgentRuntimeDeps) {}

  /** Connects the runtime to its stream (a cycle: the connection calls back into the session). */
  attach(connection: ControllerConnection): void {
    this.connection = connection;
    this.deps.supervisor.onStatus((event) => {
      if (this.connection?.connected) this.connection.send(replicaStatusMessage(event));
      else if (event.state === 'failed') this.unheard.record(replicaStatusToWire(event), this.deps.now());
    });
  }

  /** The connection reached a leader (Welcome) or lost it: a new leader is told the failures nobody heard. */
  leaderChanged(connected: boolean): void {
    if (!connected || this.unheard.size === 0) return;
    const { failures, dropped } = this.unheard.take();
    this.connection?.send({ payload: { $case: 'unheardFailures', value: { failures } } });
    this.deps.logger.info({ failures: failures.length, dropped }, 'reported engine failures no leader heard');
  }

  /** Re-adopts engines left by an earlier agent process, then connects. */
  async start(): Promise<void> {
    if (!this.connection) throw new Error('AgentRuntime.start before attach');
    await this.deps.supervisor.init();
    const adopted = this.deps.supervisor.snapshots();
    if (adopted.length > 0) this.deps.logger.info({ replicas: adopted.map((r) => `${r.replicaId}:${r.state}`) }, 'supervising replicas from before this start');
    this.connection.start();
  }

  /** Disconnects and stops watching engines; the engines keep running for the next agent process. */
  stop(): void {
    this.connection?.stop();
    this.deps.supervisor.shutdown();
  }

  async register(): Promise<Register> {
    const inventory = await this.deps.discovery.discover();
    const { identity } = this.deps;
    return {
      nodeId: identity.nodeId,
      address: identity.address,
      labels: { ...inventory.labels },
      ...(inventory.fabric !== undefined && { fabric: inventory.fabric }),
      gpus: inventory.gpus.map(gpuToWire),
      cpuCores: inventory.cpuCores,
      memoryBytes: inventory.memoryBytes,
      cache: {
        dir: inventory.cache.dir,
        totalBytes: inventory.cache.totalBytes,
        freeBytes: inventory.cache.freeBytes,
        entries: inventory.cache.entries.map(cacheEntryToWire),
      },
      replicas: this.deps.supervisor.snapshots().map(supervisedToWire),
      agentVersion: identity.agentVersion,
    };
  }

  async heartbeat(stream: StreamState): Promise<Heartbeat> {
    const replicas = this.deps.supervisor.snapshots().map(supervisedToWire);
    let inventory: NodeInventory;
    try {
      inventory = await this.deps.discovery.discover();
    } catch (error) {
      // Liveness and replica state still go out; the unknown parts stay unset, not zero.
      this.deps.logger.warn({ err: errorMessage(error) }, 'discovery failed; heartbeat carries replicas only');
      return { gpus: [], replicas };
    }
    const entries = inventory.cache.entries.map(cacheEntryToWire);
    const listing = JSON.stringify(entries);
    const changed = listing !== stream.lastListing;
    stream.lastListing = listing;
    return {
      gpus: inventory.gpus.map(gpuStateToWire),
      cacheFreeBytes: inventory.cache.freeBytes,
      replicas,
      ...(changed && { cacheListing: { entries } }),
    };
  }

  handle(command: ControllerCommand): void {
    void this.run(command).catch((error) => this.deps.logger.error({ command: command.$case, err: errorMessage(error) }, 'command failed unexpectedly'));
  }

  private async run(command: ControllerCommand): Promise<void> {
    const reply = (ok: boolean, message: string, paths: Parameters<typeof commandResultMessage>[3] = []): void => {
      this.connection?.send(commandResultMessage(command.value.commandId, ok, message, paths));
    };
    switch (command.$case) {
      case 'startReplica': {
        let spec;
        try {
          spec = replicaSpecFromWire(command.value);
        } catch (error) {
          reply(false, errorMessage(error));
          return;
        }
        this.deps.logger.info({ replicaId: spec.replicaId, model: spec.model, engine: spec.engine }, 'StartReplica');
        const outcome = await this.deps.supervisor.start(spec);
        reply(outcome.ok, outcome.message);
        return;
      }
      case 'stopReplica': {
        const { replicaId, graceMs } = command.value;
        this.deps.logger.info({ replicaId, graceMs }, 'StopReplica');
        const outcome = await this.deps.supervisor.stop(replicaId, graceMs);
        reply(outcome.ok, outcome.message);
        return;
      }
      case 'fetchWeights': {
        const m = command.value;
        try {
          const outcome = await this.deps.fetcher.fetch({
            source: m.source,
            cacheName: m.cacheName,
            ...(m.sizeBytes !== undefined && { sizeBytes: m.sizeBytes }),
            ...(m.sha256 !== undefined && m.sha256 !== '' && { sha256: m.sha256 }),
          });
          reply(true, outcome.message);
        } catch (error) {
          reply(false, errorMessage(error));
        }
        return;
      }
      case 'collectWeights': {
        const paths = await this.deps.collector.collect(command.value.paths);
        const count = (o: string): number => paths.filter((p) => p.outcome === o).length;
        const failed = count('failed');
        reply(failed === 0, `removed ${count('removed')}, refused ${count('refused')}, not found ${count('not-found')}, failed ${failed}`, paths);
        return;
      }
    }
  }
}
