import { DomainError, ErrorCode } from '@llmgw/domain';
import { errorMessage, type AgentLogger } from '../runtime/agent.logger';
import type { EngineRecordRepository } from '../state/engine-record.repository';
import { SourceRefusedError, type SourcePolicy } from '../weights/source.policy';
import { picksRendezvousPort, planReplicaLaunch, rendezvousPortOf, withRendezvousPort } from './engine-launch.planner';
import { isValidReplicaId, type ReplicaSnapshot, type ReplicaSpec, type ReplicaStatusEvent } from './replica.model';
import { ReplicaSupervisor, type SupervisionSettings, type WeightsProvider } from './replica.supervisor';

export interface SupervisorDeps {
  readonly records: EngineRecordRepository;
  readonly weights: WeightsProvider;
  readonly logger: AgentLogger;
  /** Wall clock, ms since the epoch. */
  readonly now: () => number;
  /** This node's source and environment policy, applied to every StartReplica before anything runs. */
  readonly policy: SourcePolicy;
  /**
   * Picks a port free on the host for an engine whose request names none, and for a multi-node
   * rank 0's Ray head (pickPortInRange over LLMGW_AGENT_ENGINE_PORTS in the agent).
   */
  readonly pickPort: (host: string) => Promise<number>;
}

const PORT_PICK_ATTEMPTS = 8;

/** The answer to one command, as CommandResult carries it. */
export interface CommandOutcome {
  readonly ok: boolean;
  readonly message: string;
}

/**
 * Every replica this node supervises, keyed by replica id. Commands are idempotent: starting a
 * replica that is already supervised reports its state instead of starting a second engine;
 * stopping one that is not supervised reports `stopped`. Status changes go to the listener set
 * with `onStatus`.
 */
export class SupervisorService {
  private readonly replicas = new Map<string, ReplicaSupervisor>();
  /** Replica ids between "not supervised yet" and "created": a second StartReplica must not slip in. */
  private readonly creating = new Set<string>();
  /** Ports picked for replicas still being created (not yet in `replicas`). */
  private readonly reserved = new Set<number>();
  private listener: (event: ReplicaStatusEvent) => void = () => undefined;
  private logTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly settings: SupervisionSettings,
    private readonly deps: SupervisorDeps,
    /** How often engine logs are checked for rotation, ms. */
    private readonly logCheckMs = 5_000,
  ) {}

  /** Where replica status changes go (the controller stream). */
  onStatus(listener: (event: ReplicaStatusEvent) => void): void {
    this.listener = listener;
  }

  /**
   * Re-adopts what an earlier agent process left running (from the state directory) and starts
   * the log rotation timer. Resolves once every record has been looked at, so the first Register
   * already lists the adopted engines.
   */
  async init(): Promise<void> {
    const { records, problems } = this.deps.records.list();
    for (const p of problems) this.deps.logger.warn({ file: p.file, problem: p.message }, 'engine record ignored');
    await Promise.all(
      records.map(async (record) => {
        const launch = { plan: record.plan, weightsPath: record.weightsPath, cached: record.cached };
        const replica = this.create(record.spec, launch, record.restarts);
        try {
          await replica.adopt(record);
        } catch (error) {
          this.deps.logger.error({ replicaId: record.spec.replicaId, err: errorMessage(error) }, 'cannot re-adopt engine');
        }
      }),
    );
    this.logTimer = setInterval(() => this.rotateLogs(), this.logCheckMs);
    this.logTimer.unref();
  }

  /** Every supervised replica as it stands (Register and Heartbeat). */
  snapshots(): ReplicaSnapshot[] {
    return [...this.replicas.values()].map((r) => r.snapshot());
  }

  /** Absolute paths of the weights replicas on this node use (never collected). */
  weightsInUse(): Map<string, string> {
    const inUse = new Map<string, string>();
    for (const r of this.replicas.values()) inUse.set(r.launch.weightsPath, r.spec.replicaId);
    return inUse;
  }

  /**
   * Handles StartReplica. Refuses a request it cannot launch, or one this node's source policy
   * refuses (a source, `localPath` or profile env), with every problem; never starts a replica twice.
   */
  async start(spec: ReplicaSpec): Promise<CommandOutcome> {
    if (!isValidReplicaId(spec.replicaId)) {
      return { ok: false, message: `replica id ${JSON.stringify(spec.replicaId)} is not valid: 1..128 of [A-Za-z0-9._-], starting with a letter or digit` };
    }
    const existing = this.replicas.get(spec.replicaId);
    if (existing) {
      if (existing.isStopping) return { ok: false, message: `replica ${spec.replicaId} is being stopped; ask again once it is stopped` };
      const conflict = differs(existing.spec, spec);
      if (conflict) return { ok: false, message: `replica ${spec.replicaId} already runs here with another ${conflict}; stop it first` };
      if (existing.hasGivenUp) {
        existing.begin();
        return { ok: true, message: `replica ${spec.replicaId} had failed; starting it again` };
      }
      existing.reportCurrent();
      return { ok: true, message: `replica ${spec.replicaId} is already supervised (${existing.state})` };
    }
    if (this.creating.has(spec.replicaId)) return { ok: true, message: `replica ${spec.replicaId} is already being started` };
    let replica: ReplicaSupervisor;
    this.creating.add(spec.replicaId);
    const picked: number[] = [];
    try {
      const admitted = await this.admit(spec);
      // The engine port, and for a multi-node rank 0 the rendezvous port, picked like each other:
      // free on the node and held by no other replica here (a port picked a moment ago and not
      // bound yet is free to the OS too).
      const port = admitted.port ?? (await this.pickUnusedPort(picked));
      const launchSpec = picksRendezvousPort(admitted) ? withRendezvousPort(admitted, await this.pickUnusedPort(picked, port)) : admitted;
      replica = this.create(launchSpec, planReplicaLaunch(launchSpec, port, this.settings.launch), 0);
    } catch (error) {
      const message = error instanceof DomainError && error.code === ErrorCode.InvalidArgument ? error.message : `cannot start: ${errorMessage(error)}`;
      this.deps.logger.warn({ replicaId: spec.replicaId, err: message }, 'StartReplica refused');
      return { ok: false, message };
    } finally {
      this.creating.delete(spec.replicaId);
      for (const p of picked) this.reserved.delete(p);
    }
    replica.begin();
    return { ok: true, message: `starting replica ${spec.replicaId} on port ${replica.snapshot().port ?? '-'}` };
  }

  /** Handles StopReplica: resolves once the engine is gone. A replica not supervised counts as stopped. */
  async stop(replicaId: string, graceMs?: number): Promise<CommandOutcome> {
    const replica = this.replicas.get(replicaId);
    if (!replica) {
      this.listener({ replicaId, state: 'stopped', restarts: 0, lastLogLines: [], reason: 'not supervised on this node' });
      return { ok: true, message: `replica ${replicaId} is not supervised here` };
    }
    try {
      await replica.stop(graceMs);
    } catch (error) {
      return { ok: false, message: errorMessage(error) };
    }
    this.replicas.delete(replicaId);
    return { ok: true, message: `replica ${replicaId} stopped` };
  }

  /** The agent is exiting: stop watching, leave every engine running for the next agent process. */
  shutdown(): void {
    if (this.logTimer) clearInterval(this.logTimer);
    for (const r of this.replicas.values()) r.detach();
  }

  /** Checks every engine log against the size bound now. */
  rotateLogs(): void {
    for (const r of this.replicas.values()) {
      try {
        r.log.rotateIfNeeded();
      } catch (error) {
        this.deps.logger.warn({ replicaId: r.spec.replicaId, err: errorMessage(error) }, 'engine log rotation failed');
      }
    }
  }

  /** One replica's supervisor, for tests and diagnostics. */
  get(replicaId: string): ReplicaSupervisor | undefined {
    return this.replicas.get(replicaId);
  }

  /**
   * The spec as this node's policy admits it: every refused env variable, the source and
   * `localPath` checked. A `file://` source becomes a `localPath` with symbolic links resolved,
   * so the engine opens exactly the file that was checked. Throws a DomainError (InvalidArgument)
   * listing every refusal.
   */
  private async admit(spec: ReplicaSpec): Promise<ReplicaSpec> {
    const { policy } = this.deps;
    const problems = policy.envProblems(spec.env);
    let admitted = spec;
    try {
      const source = await policy.admitSource(spec.weightsSource);
      if (spec.localPath !== undefined && spec.localPath !== '') {
        admitted = { ...spec, localPath: await policy.admitLocalPath(spec.localPath, this.settings.launch.cacheDir) };
      } else if (source.kind === 'file') {
        admitted = { ...spec, localPath: source.path };
      }
    } catch (error) {
      if (!(error instanceof SourceRefusedError)) throw error;
      problems.push(error.message);
    }
    if (problems.length > 0) {
      const message = `replica ${spec.replicaId} refused by this node's policy, nothing started:\n${problems.map((p) => `- ${p}`).join('\n')}`;
      throw new DomainError(ErrorCode.InvalidArgument, message, problems.map((p) => ({ path: '', message: p })));
    }
    return admitted;
  }

  /**
   * A port from the picker that no supervised replica uses (engine or rendezvous port) and none
   * being created has picked (nor `also`); reserved in `picked` (and the service) until the
   * replica exists.
   */
  private async pickUnusedPort(picked: number[], also?: number): Promise<number> {
    const inUse = new Set<number>([...this.reserved, ...picked, ...(also !== undefined ? [also] : [])]);
    for (const r of this.replicas.values()) {
      const s = r.snapshot();
      if (s.port !== undefined) inUse.add(s.port);
      const rendezvous = rendezvousPortOf(r.spec);
      if (rendezvous !== undefined) inUse.add(rendezvous);
    }
    const pick = this.deps.pickPort;
    for (let i = 0; i < PORT_PICK_ATTEMPTS; i++) {
      const port = await pick(this.settings.launch.engineHost);
      if (inUse.has(port)) continue;
      picked.push(port);
      this.reserved.add(port);
      return port;
    }
    throw new Error(`no free port after ${PORT_PICK_ATTEMPTS} picks: each was one a replica on this node already uses`);
  }

  private create(spec: ReplicaSpec, launch: ReplicaSupervisor['launch'], restarts: number): ReplicaSupervisor {
    const replica = new ReplicaSupervisor(
      spec,
      launch,
      this.settings,
      { records: this.deps.records, weights: this.deps.weights, logger: this.deps.logger, now: this.deps.now, emit: (e) => this.listener(e) },
      restarts,
    );
    this.replicas.set(spec.replicaId, replica);
    return replica;
  }
}

/** The first field that makes `next` a different replica than `current`, if any. */
function differs(current: ReplicaSpec, next: ReplicaSpec): string | undefined {
  if (current.model !== next.model) return `model (${current.model})`;
  if (current.engine !== next.engine) return `engine (${current.engine})`;
  if (current.weightsSource !== next.weightsSource) return `weights source (${current.weightsSource})`;
  if (current.gpuIndices.join(',') !== next.gpuIndices.join(',')) return `GPU set (${current.gpuIndices.join(',') || 'none'})`;
  if (current.rank !== next.rank) return `rank (${current.rank})`;
  if (next.port !== undefined && current.port !== undefined && current.port !== next.port) return `port (${current.port})`;
  return undefined;
}
