import { closeSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { backoffDelay } from '@llmgw/domain';
import type { LaunchPlan, ProcessSpec } from '@llmgw/engines';
import { errorMessage, type AgentLogger } from '../runtime/agent.logger';
import { isSameLiveProcess } from '../state/proc-stat.reader';
import type { EngineRecord, EngineRecordRepository } from '../state/engine-record.repository';
import { EngineLogFile, type LogRotation } from './engine-log.file';
import { rendezvousPortOf, type ReplicaLaunch, type LaunchSettings } from './engine-launch.planner';
import { adoptEngine, spawnEngine, type EngineExit, type EngineProcess } from './engine.process';
import { watchLiveness, waitUntilReady } from './readiness.probe';
import type { AgentReplicaState, ReplicaSnapshot, ReplicaSpec, ReplicaStatusEvent } from './replica.model';

/** How the agent supervises engines. Times in milliseconds. */
export interface SupervisionSettings {
  /** How long an engine may take to become ready before it counts as failed. */
  readonly readyTimeoutMs: number;
  /** Pause between health probes while an engine loads. */
  readonly readyPollMs: number;
  /** Restarts after consecutive failures before the replica stays failed. */
  readonly restartLimit: number;
  /** First restart delay; doubles on each consecutive failure. */
  readonly restartBackoffMs: number;
  readonly restartBackoffMaxMs: number;
  /** An engine ready this long has its consecutive failures forgotten. */
  readonly stableAfterMs: number;
  /** Default time between SIGTERM and SIGKILL when stopping. */
  readonly stopGraceMs: number;
  /** How often an adopted engine (not the agent's child) is checked for life. */
  readonly livenessPollMs: number;
  /**
   * Health checks of a ready engine: every `intervalMs`, each failing without a 200 within
   * `timeoutMs`; `failures` in a row and the engine is reported not ready and restarted.
   */
  readonly liveness: { readonly intervalMs: number; readonly timeoutMs: number; readonly failures: number };
  readonly logDir: string;
  readonly logRotation: LogRotation;
  /** The environment every engine starts from; the plan's variables go on top. */
  readonly engineEnv: Readonly<Record<string, string>>;
  readonly launch: LaunchSettings;
}

/** Makes sure a cached source's weights are on disk, fetching them when absent. */
export interface WeightsProvider {
  ensure(
    request: { readonly source: string; readonly cacheName: string },
    onProgress: (progress: { readonly fetchedBytes: number; readonly totalBytes?: number }) => void,
  ): Promise<void>;
}

export interface ReplicaSupervisorDeps {
  readonly records: EngineRecordRepository;
  readonly weights: WeightsProvider;
  readonly logger: AgentLogger;
  /** Wall clock, ms since the epoch. */
  readonly now: () => number;
  /** Every state change (and fetch progress) of this replica. */
  readonly emit: (event: ReplicaStatusEvent) => void;
}

const LAST_LOG_LINES = 50;
const KILL_WAIT_MS = 10_000;

/** A failure of one launch attempt, with what the controller should see. */
class AttemptFailure extends Error {
  constructor(
    message: string,
    readonly details: { exitCode?: number; signal?: string } = {},
  ) {
    super(message);
  }
}

/**
 * Keeps one replica member's engine running on this node: fetch (when the weights are missing),
 * setup, spawn, readiness, then watch. A crash reports `failed` with the exit and the last log
 * lines and restarts after an exponential backoff, up to the limit, after which it stays failed
 * (the controller decides where it goes next). Every attempt carries a generation number, so a
 * continuation of an attempt that was superseded (stopped, restarted, detached) does nothing.
 */
export class ReplicaSupervisor {
  readonly log: EngineLogFile;
  private stateValue: AgentReplicaState = 'starting';
  private reasonValue: string | undefined;
  private restartsValue: number;
  private consecutiveFailures = 0;
  private proc: EngineProcess | undefined;
  private procStartedAt = 0;
  private spawning: Promise<unknown> | undefined;
  private generation = 0;
  private stopping = false;
  private gaveUp = false;
  private readySince: number | undefined;
  private pendingFailure: string | undefined;
  private probeAbort: AbortController | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  /** True once setup or the engine may have left something its teardown has to end. */
  private needsTeardown = false;
  private setupProc: EngineProcess | undefined;
  /** True once setup has completed here (or in the agent that started the adopted engine). */
  private setUp = false;

  constructor(
    readonly spec: ReplicaSpec,
    readonly launch: ReplicaLaunch,
    private readonly settings: SupervisionSettings,
    private readonly deps: ReplicaSupervisorDeps,
    restarts = 0,
  ) {
    this.restartsValue = restarts;
    this.log = new EngineLogFile(join(settings.logDir, `${spec.replicaId}.log`), settings.logRotation);
  }

  get state(): AgentReplicaState {
    return this.stateValue;
  }

  get isStopping(): boolean {
    return this.stopping;
  }

  /** True once the agent gave up restarting it. */
  get hasGivenUp(): boolean {
    return this.gaveUp;
  }

  /** The engine's pid while one runs. */
  get pid(): number | undefined {
    return this.proc?.isRunning() ? this.proc.pid : undefined;
  }

  get plan(): LaunchPlan {
    return this.launch.plan;
  }

  snapshot(): ReplicaSnapshot {
    const pid = this.pid;
    // Announced only once setup ran: the members told this port must find the Ray head on it.
    const rendezvousPort = this.setUp ? rendezvousPortOf(this.spec) : undefined;
    return {
      replicaId: this.spec.replicaId,
      model: this.spec.model,
      engine: this.spec.engine,
      state: this.stateValue,
      ...(this.plan.role === 'server' && { port: this.plan.port }),
      ...(pid !== undefined && { pid }),
      ...(rendezvousPort !== undefined && { rendezvousPort }),
      gpuIndices: this.spec.gpuIndices,
      rank: this.spec.rank,
      restarts: this.restartsValue,
      ...(this.reasonValue !== undefined && { reason: this.reasonValue }),
    };
  }

  /** Starts the first attempt (or a fresh series after the agent gave up). */
  begin(): void {
    this.gaveUp = false;
    this.consecutiveFailures = 0;
    void this.attempt();
  }

  /**
   * Takes over what an earlier agent process left in `record`: a live engine (same pid and start
   * time) is watched again without being restarted; one that died meanwhile counts as a crash;
   * one the earlier agent had given up on stays failed.
   */
  async adopt(record: EngineRecord): Promise<void> {
    const gen = ++this.generation;
    this.needsTeardown = true; // the earlier agent process ran its setup
    this.setUp = true;
    if (record.failedReason !== undefined) {
      this.gaveUp = true;
      this.setState('failed', record.failedReason);
      return;
    }
    const p = record.process;
    if (p && isSameLiveProcess(p.pid, p.startTime)) {
      const proc = adoptEngine(p.pid, p.startTime, this.settings.livenessPollMs);
      this.proc = proc;
      this.procStartedAt = p.startedAt;
      this.watch(proc, gen);
      this.log.note(`re-adopted engine pid ${p.pid} after an agent restart`);
      this.deps.logger.info({ replicaId: this.spec.replicaId, pid: p.pid }, 'engine re-adopted after agent restart');
      const plan = this.plan;
      if (plan.role === 'worker') {
        this.becomeReady(gen);
        return;
      }
      this.setState('starting', 'adopted; checking health');
      // One quick probe so Register can already say `ready`; a loading engine keeps being probed.
      const quick = await waitUntilReady({ url: this.healthUrl(), readiness: plan.readiness, deadlineMs: 0, intervalMs: 0, signal: new AbortController().signal });
      if (gen !== this.generation) return;
      if (quick.ready) this.becomeReady(gen);
      else void this.probe(gen);
      return;
    }
    this.log.note('engine from before the agent restart is gone');
    this.failAttempt(gen, new AttemptFailure('engine exited while the agent was not running (exit status unknown)'));
  }

  /**
   * Stops the engine: SIGTERM to its process group, `graceMs` to exit, then SIGKILL. Pending
   * restarts and probes are cancelled and the record removed. Resolves once the process is gone.
   */
  async stop(graceMs: number = this.settings.stopGraceMs): Promise<void> {
    this.stopping = true;
    this.generation++;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.probeAbort?.abort('stopping');
    if (this.spawning) await this.spawning.catch(() => undefined);
    const setup = this.setupProc;
    if (setup?.isRunning()) {
      setup.signal('SIGKILL');
      await settlesWithin(setup.exited, KILL_WAIT_MS);
    }
    const proc = this.proc;
    if (proc && proc.isRunning()) {
      this.log.note(`stopping pid ${proc.pid}: SIGTERM, SIGKILL after ${graceMs} ms`);
      await terminate(proc, graceMs);
      if (!(await settlesWithin(proc.exited, KILL_WAIT_MS))) {
        throw new Error(`engine pid ${proc.pid} of replica ${this.spec.replicaId} still runs ${KILL_WAIT_MS} ms after SIGKILL`);
      }
      if (!proc.adopted) proc.signal('SIGKILL'); // whatever it left in its group
    }
    this.proc = undefined;
    await this.runTeardown();
    this.deps.records.remove(this.spec.replicaId);
    this.log.note('stopped');
    this.setState('stopped', undefined);
  }

  /** Stops watching without touching the engine (the agent is exiting; the engine keeps running). */
  detach(): void {
    this.generation++;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.probeAbort?.abort('agent shutting down');
    this.proc?.detach();
  }

  /** Emits the current state again (e.g. an idempotent StartReplica asks for it). */
  reportCurrent(): void {
    this.deps.emit({ ...this.snapshot(), lastLogLines: [] });
  }

  // ---- one attempt ---------------------------------------------------------------------

  private async attempt(): Promise<void> {
    const gen = ++this.generation;
    const current = (): boolean => gen === this.generation;
    this.pendingFailure = undefined;
    this.readySince = undefined;
    try {
      // 1. Weights: fetch into the cache when missing; a file:// path must simply exist.
      if (!existsSync(this.launch.weightsPath)) {
        if (!this.launch.cached) throw new AttemptFailure(`weights ${this.launch.weightsPath} do not exist on this node`);
        this.setState('fetching', `fetching weights ${this.spec.cacheName}`);
        await this.deps.weights.ensure({ source: this.spec.weightsSource, cacheName: this.spec.cacheName }, (p) => {
          if (current() && this.stateValue === 'fetching') {
            this.deps.emit({ ...this.snapshot(), lastLogLines: [], fetchedBytes: p.fetchedBytes, ...(p.totalBytes !== undefined && { fetchTotalBytes: p.totalBytes }) });
          }
        });
        if (!current()) return;
      }
      // 2. What the last attempt left (a Ray head on its port), then the setup commands, in
      //    order, each to completion.
      await this.runTeardown();
      if (!current()) return;
      for (const step of this.plan.setup) {
        await this.runSetup(step);
        if (!current()) return;
      }
      this.setUp = true;
      // 3. The engine itself, output straight into its log file.
      const proc = await this.spawn();
      if (!current()) {
        proc.signal('SIGKILL');
        return;
      }
      this.watch(proc, gen);
      this.setState('starting', undefined);
      // 4. Readiness (a worker serves nothing: alive is all it can be).
      if (this.plan.role === 'worker') this.becomeReady(gen);
      else await this.probe(gen);
    } catch (error) {
      if (!current()) return;
      this.failAttempt(gen, error instanceof AttemptFailure ? error : new AttemptFailure(errorMessage(error)));
    }
  }

  private async spawn(): Promise<EngineProcess> {
    const plan = this.plan;
    this.log.note(`starting ${plan.command} ${plan.args.join(' ')}`);
    const fd = this.log.openForAppend();
    const spawning = spawnEngine({ command: plan.command, args: plan.args, env: { ...this.settings.engineEnv, ...plan.env }, logFd: fd });
    this.spawning = spawning;
    let proc: EngineProcess;
    try {
      proc = await spawning;
    } finally {
      closeSync(fd);
      this.spawning = undefined;
    }
    this.proc = proc;
    this.needsTeardown = true;
    this.procStartedAt = this.deps.now();
    this.saveRecord();
    this.deps.logger.info({ replicaId: this.spec.replicaId, pid: proc.pid, port: this.snapshot().port, command: plan.command }, 'engine started');
    return proc;
  }

  private async runSetup(step: ProcessSpec): Promise<void> {
    this.needsTeardown = true;
    const proc = await this.startStep('setup', step);
    this.setupProc = proc;
    if (this.stopping) proc.signal('SIGKILL'); // stop() came while it was being started
    const exit = await proc.exited;
    if (this.setupProc === proc) this.setupProc = undefined;
    if (exit.code !== 0) {
      throw new AttemptFailure(`setup command ${step.command} ${describeExit(exit)}`, exitDetails(exit));
    }
  }

  /**
   * Runs the plan's teardown commands when an earlier setup or engine may have left something
   * behind. Best effort: a step that fails or hangs past its bound is logged, and the next one
   * still runs.
   */
  private async runTeardown(): Promise<void> {
    if (!this.needsTeardown) return;
    this.needsTeardown = false;
    for (const step of this.plan.teardown) {
      try {
        const proc = await this.startStep('teardown', step);
        if (!(await settlesWithin(proc.exited, KILL_WAIT_MS))) {
          proc.signal('SIGKILL');
          throw new Error(`${step.command} still ran after ${KILL_WAIT_MS} ms; killed`);
        }
        const exit = await proc.exited;
        if (exit.code !== 0) throw new Error(`${step.command} ${describeExit(exit)}`);
      } catch (error) {
        this.log.note(`teardown failed: ${errorMessage(error)}`);
        this.deps.logger.warn({ replicaId: this.spec.replicaId, err: errorMessage(error) }, 'teardown command failed');
      }
    }
  }

  /** Starts a setup or teardown command with the plan's environment, output into the engine log. */
  private async startStep(kind: 'setup' | 'teardown', step: ProcessSpec): Promise<EngineProcess> {
    this.log.note(`${kind}: ${step.command} ${step.args.join(' ')}`);
    const fd = this.log.openForAppend();
    try {
      return await spawnEngine({ command: step.command, args: step.args, env: { ...this.settings.engineEnv, ...this.plan.env }, logFd: fd });
    } finally {
      closeSync(fd);
    }
  }

  private watch(proc: EngineProcess, gen: number): void {
    void proc.exited.then((exit) => {
      if (gen !== this.generation || proc !== this.proc || this.stopping) return;
      this.probeAbort?.abort('engine exited');
      this.proc = undefined;
      if (!proc.adopted) proc.signal('SIGKILL'); // leftovers of its group, so the port and GPUs are free
      const why = this.pendingFailure ?? `engine ${describeExit(exit)}`;
      this.log.note(why);
      this.failAttempt(gen, new AttemptFailure(why, exitDetails(exit)));
    });
  }

  private async probe(gen: number): Promise<void> {
    const plan = this.plan;
    if (plan.role !== 'server') return;
    const abort = new AbortController();
    this.probeAbort = abort;
    const outcome = await waitUntilReady({
      url: this.healthUrl(),
      readiness: plan.readiness,
      deadlineMs: this.settings.readyTimeoutMs,
      intervalMs: this.settings.readyPollMs,
      signal: abort.signal,
    });
    if (gen !== this.generation || this.stopping) return;
    if (outcome.ready) {
      this.becomeReady(gen);
    } else if (!outcome.aborted) {
      // Killing it lets the exit watcher report the failure with this reason and restart it.
      this.pendingFailure = outcome.reason;
      this.log.note(`${outcome.reason}; killing it`);
      this.proc?.signal('SIGKILL');
    }
  }

  private healthUrl(): string {
    const plan = this.plan;
    if (plan.role !== 'server') throw new Error('a worker has no health endpoint');
    const host = this.settings.launch.engineHost;
    const probeHost = host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
    return `http://${probeHost}:${plan.port}${plan.healthPath}`;
  }

  private becomeReady(gen: number): void {
    if (gen !== this.generation) return;
    this.readySince = this.deps.now();
    this.deps.logger.info({ replicaId: this.spec.replicaId, pid: this.pid }, 'engine ready');
    this.setState('ready', undefined);
    if (this.plan.role === 'server') void this.watchHealth(gen);
  }

  /**
   * While ready: health checks until the engine stops answering them. Then it is reported not
   * ready at once and stopped (SIGCONT, so a frozen one can act on SIGTERM; SIGKILL after the
   * grace); its exit is then a failure like a crash, restarted with the same backoff.
   */
  private async watchHealth(gen: number): Promise<void> {
    const abort = new AbortController();
    this.probeAbort = abort;
    const { intervalMs, timeoutMs, failures } = this.settings.liveness;
    const outcome = await watchLiveness({ url: this.healthUrl(), intervalMs, timeoutMs, failures, signal: abort.signal });
    const proc = this.proc;
    if (outcome.aborted || gen !== this.generation || this.stopping || proc === undefined) return;
    this.pendingFailure = outcome.reason;
    this.log.note(`${outcome.reason}; restarting it`);
    this.deps.logger.warn({ replicaId: this.spec.replicaId, pid: proc.pid, reason: outcome.reason }, 'engine unresponsive; restarting it');
    this.setState('starting', `${outcome.reason}; restarting it`);
    await terminate(proc, this.settings.stopGraceMs);
  }

  /** Reports the failure and either schedules the next attempt or gives up. */
  private failAttempt(gen: number, failure: AttemptFailure): void {
    if (gen !== this.generation || this.stopping) return;
    if (this.readySince !== undefined && this.deps.now() - this.readySince >= this.settings.stableAfterMs) this.consecutiveFailures = 0;
    this.readySince = undefined;
    this.consecutiveFailures++;
    const lastLogLines = this.log.tail(LAST_LOG_LINES);
    const limit = this.settings.restartLimit;
    let reason: string;
    if (this.consecutiveFailures > limit) {
      this.gaveUp = true;
      reason = `${failure.message}; gave up after ${limit} restart(s)`;
    } else {
      const delay = backoffDelay(this.consecutiveFailures, { minMs: this.settings.restartBackoffMs, maxMs: this.settings.restartBackoffMaxMs });
      reason = `${failure.message}; restart ${this.consecutiveFailures}/${limit} in ${delay} ms`;
      this.restartTimer = setTimeout(() => {
        if (gen !== this.generation || this.stopping) return;
        this.restartsValue++;
        void this.attempt();
      }, delay);
    }
    this.stateValue = 'failed';
    this.reasonValue = reason;
    this.saveRecord();
    this.deps.logger.warn({ replicaId: this.spec.replicaId, reason, ...failure.details }, 'engine failed');
    this.deps.emit({ ...this.snapshot(), ...failure.details, lastLogLines });
  }

  private setState(state: AgentReplicaState, reason: string | undefined): void {
    this.stateValue = state;
    this.reasonValue = reason;
    this.deps.emit({ ...this.snapshot(), lastLogLines: [] });
  }

  private saveRecord(): void {
    const proc = this.proc;
    const record: EngineRecord = {
      version: 1,
      spec: this.spec,
      plan: this.plan,
      weightsPath: this.launch.weightsPath,
      cached: this.launch.cached,
      logFile: this.log.path,
      ...(proc && proc.isRunning() && proc.startTime !== '' && { process: { pid: proc.pid, startTime: proc.startTime, startedAt: this.procStartedAt } }),
      restarts: this.restartsValue,
      ...(this.gaveUp && this.reasonValue !== undefined && { failedReason: this.reasonValue }),
    };
    try {
      this.deps.records.save(record);
    } catch (error) {
      this.deps.logger.error({ replicaId: this.spec.replicaId, err: errorMessage(error) }, 'cannot write the engine record; it will not be re-adopted after an agent restart');
    }
  }
}

function describeExit(exit: EngineExit): string {
  if (!exit.known) return 'exited (status unknown: not the agent’s child)';
  if (exit.signal !== undefined) return `was killed by ${exit.signal}`;
  return `exited with code ${exit.code}`;
}

function exitDetails(exit: EngineExit): { exitCode?: number; signal?: string } {
  return { ...(exit.code !== undefined && { exitCode: exit.code }), ...(exit.signal !== undefined && { signal: exit.signal }) };
}

/**
 * Ends an engine: SIGCONT (a stopped process acts on no other signal until it runs again),
 * SIGTERM, `graceMs` to exit, then SIGKILL. Resolves once it exited or SIGKILL was sent.
 */
async function terminate(proc: EngineProcess, graceMs: number): Promise<void> {
  if (graceMs > 0) {
    proc.signal('SIGCONT');
    proc.signal('SIGTERM');
    if (await settlesWithin(proc.exited, graceMs)) return;
  }
  proc.signal('SIGKILL');
}

async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
