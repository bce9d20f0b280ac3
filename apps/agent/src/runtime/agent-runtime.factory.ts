import { systemClock } from '@llmgw/domain';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ControllerClientFactory } from '../connection/controller.clients';
import { ControllerConnection, type JoinRejectedError } from '../connection/controller.connection';
import { DiscoveryService, type DiscoveryOptions } from '../discovery/discovery.service';
import { EngineRecordRepository } from '../state/engine-record.repository';
import { loadOrCreateNodeId } from '../state/node-id.store';
import { NodeSecretStore } from '../state/node-secret.store';
import type { ProgramPrefix } from '../supervision/engine-launch.planner';
import { ephemeralPortRange, pickPortInRange, rangesOverlap } from '../supervision/free-port.picker';
import { SupervisorService } from '../supervision/supervisor.service';
import { PolicyHttpClient, type HttpClient } from '../weights/http.client';
import { SourcePolicy } from '../weights/source.policy';
import { WeightsCollector } from '../weights/weights.collector';
import { WeightsFetcher } from '../weights/weights.fetcher';
import type { AgentLogger } from './agent.logger';
import { AgentRuntime } from './agent.runtime';
import { pickEngineEnv, type RuntimeOptions } from './runtime.config';

/** A logger that makes per-class children, like pino's. */
export interface ContextLogger extends AgentLogger {
  child(bindings: Record<string, unknown>): AgentLogger;
}

export interface CreateAgentRuntimeOptions {
  readonly runtime: RuntimeOptions;
  /** Discovery settings; the node id becomes the fake-GPU seed unless one is set. */
  readonly discovery: DiscoveryOptions;
  /** The agent's environment; engines get only what LLMGW_AGENT_ENGINE_ENV lets through. */
  readonly inheritedEnv: Readonly<Record<string, string | undefined>>;
  readonly logger: ContextLogger;
  /** The controller refused this agent: stop the process with a non-zero status. */
  readonly onFatal: (error: JoinRejectedError) => void;
  readonly agentVersion?: string;
  /** Test seam: the HTTP client weights are fetched with. */
  readonly http?: HttpClient;
  /** Makes the AgentService client for a controller address (controller.clients.ts). */
  readonly createClient: ControllerClientFactory;
}

export interface CreatedAgentRuntime {
  readonly runtime: AgentRuntime;
  readonly nodeId: string;
  readonly supervisor: SupervisorService;
}

/**
 * Builds the agent from validated settings: its identity (node id kept in the state directory),
 * the engine supervisor with what engines inherit, the weights fetcher and collector, discovery,
 * and the controller connection. Nothing starts until `runtime.start()`.
 */
export function createAgentRuntime(options: CreateAgentRuntimeOptions): CreatedAgentRuntime {
  const { runtime: o, logger } = options;
  mkdirSync(o.stateDir, { recursive: true, mode: 0o750 });
  const nodeId = o.nodeId ?? loadOrCreateNodeId(o.stateDir).nodeId;
  const engineEnv = pickEngineEnv(options.inheritedEnv, o.engineEnvPassthrough);
  const cacheDir = options.discovery.cacheDir;

  // Which programs engines run is settled here, from settings: nothing is looked for on disk.
  const llamaServerBinary = o.llamaServerBinary;
  let simEngine: ProgramPrefix | undefined;
  if (o.engineOverride === 'sim') {
    if (o.simEngine === undefined) throw new Error('LLMGW_AGENT_ENGINE_OVERRIDE=sim needs LLMGW_AGENT_SIM_ENGINE, the engine simulator');
    simEngine = { command: process.execPath, args: [o.simEngine] };
    logger.warn({ engineOverride: 'sim', simEngine: o.simEngine }, 'SIMULATED ENGINES: every replica runs the engine simulator instead of vLLM or llama-server; nothing it answers comes from a model');
  } else {
    logger.info({ vllm: o.vllmBinary, llamaServer: llamaServerBinary }, 'engine programs');
  }

  const ephemeral = ephemeralPortRange();
  if (ephemeral && rangesOverlap(ephemeral, o.enginePorts)) {
    logger.warn(
      { enginePorts: `${o.enginePorts.first}-${o.enginePorts.last}`, ephemeralPorts: `${ephemeral.first}-${ephemeral.last}` },
      'LLMGW_AGENT_ENGINE_PORTS overlaps the kernel ephemeral port range: an outgoing connection may take an engine port before the engine binds it, and the replica fails until it is placed again',
    );
  }
  const records = new EngineRecordRepository(o.stateDir);
  const policy = new SourcePolicy(o.sourcePolicy);
  logger.info(
    { schemes: o.sourcePolicy.schemes, hosts: o.sourcePolicy.hosts ?? 'any', allowNets: o.sourcePolicy.allowNets.map((n) => n.text), dirs: o.sourcePolicy.dirs },
    'weights source policy',
  );
  const fetcher = new WeightsFetcher(
    options.http ?? new PolicyHttpClient(policy),
    {
      cacheDir,
      hfEndpoint: o.hfEndpoint,
      ...(o.hfToken !== undefined && { hfToken: o.hfToken }),
      attempts: o.fetchAttempts,
      retryDelayMs: 1_000,
      stallTimeoutMs: o.fetchStallTimeoutMs,
      progressIntervalMs: 1_000,
    },
    logger.child({ context: 'WeightsFetcher' }),
    policy,
  );
  const supervisor = new SupervisorService(
    {
      readyTimeoutMs: o.readyTimeoutMs,
      readyPollMs: 500,
      restartLimit: o.restartLimit,
      restartBackoffMs: o.restartBackoffMs,
      restartBackoffMaxMs: o.restartBackoffMaxMs,
      stableAfterMs: 10 * 60_000,
      stopGraceMs: o.stopGraceMs,
      livenessPollMs: 1_000,
      liveness: o.liveness,
      logDir: join(o.stateDir, 'logs'),
      logRotation: { maxBytes: o.logMaxBytes, files: o.logFiles },
      engineEnv,
      launch: { cacheDir, engineHost: o.engineHost, vllmBinary: o.vllmBinary, llamaServerBinary, ...(simEngine && { simEngine }) },
    },
    {
      records,
      weights: fetcher,
      policy,
      logger: logger.child({ context: 'SupervisorService' }),
      now: () => systemClock.now(),
      pickPort: (host) => pickPortInRange(host, o.enginePorts, Math.random),
    },
  );
  const collector = new WeightsCollector({
    cacheDir,
    inUse: () => supervisor.weightsInUse(),
    active: () => fetcher.activeNames(),
    logger: logger.child({ context: 'WeightsCollector' }),
  });
  const discovery = new DiscoveryService({ ...options.discovery, fakeGpuSeed: options.discovery.fakeGpuSeed ?? nodeId }, { logger: logger.child({ context: 'DiscoveryService' }) });
  const runtime = new AgentRuntime({
    identity: { nodeId, address: o.advertiseAddress, agentVersion: options.agentVersion ?? '' },
    discovery,
    supervisor,
    fetcher,
    collector,
    logger: logger.child({ context: 'AgentRuntime' }),
    now: () => systemClock.now(),
  });
  const connection = new ControllerConnection(
    { controllers: o.controllers, ...(o.joinToken !== undefined && { joinToken: o.joinToken }), reconnect: o.reconnect, defaultHeartbeatMs: 5_000, welcomeTimeoutMs: 30_000 },
    {
      session: runtime,
      identity: new NodeSecretStore(o.stateDir),
      logger: logger.child({ context: 'ControllerConnection' }),
      rng: { next: () => Math.random() },
      onFatal: options.onFatal,
      onLeaderChange: (connected) => runtime.leaderChanged(connected),
      createClient: options.createClient,
    },
  );
  runtime.attach(connection);
  logger.info({ nodeId, address: o.advertiseAddress, stateDir: o.stateDir, cacheDir, controllers: o.controllers }, 'agent identity');
  return { runtime, nodeId, supervisor };
}
