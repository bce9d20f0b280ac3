import type { EngineCapabilities } from '@llmgw/catalog';
import type { EngineKind, MetricMapping, Model, Problem, Profile } from '@llmgw/domain';

/** How a multi-node replica's members find the leader (rank 0). */
export interface LaunchMembers {
  /** Address of the rank-0 member as the other members reach it. */
  readonly leaderAddress: string;
  /** Port of the coordination service on the leader (the Ray head for vLLM). */
  readonly leaderPort: number;
}

/** Everything an adapter needs to start one member of one replica on one node. */
export interface LaunchSpec {
  readonly model: Model;
  readonly profile: Profile;
  readonly replicaId: string;
  /** Local path of the weights: a file, or a directory for a whole-repository source. */
  readonly weightsPath: string;
  /** Address the engine's HTTP server binds to (e.g. `0.0.0.0`). */
  readonly host: string;
  /** Port the engine's HTTP server listens on (rank 0). */
  readonly port: number;
  /** GPU indices (as nvidia-smi numbers them) placement chose on this node; empty on CPU. */
  readonly gpuIndices: readonly number[];
  /** 0 = the leader that serves HTTP; 1..nodes-1 = workers of a multi-node replica. */
  readonly rank: number;
  /** Required when `profile.nodes > 1`. */
  readonly members?: LaunchMembers;
  /** Engine executable, overriding the adapter's default (`vllm`, `llama-server`). */
  readonly binary?: string;
}

/** A command to run: an argv array, never a shell string. */
export interface ProcessSpec {
  readonly command: string;
  readonly args: readonly string[];
}

/**
 * How the engine says it is ready: vLLM refuses connections while it loads (then `/health`
 * answers 200); llama.cpp's `/health` answers 503 while loading, then 200.
 */
export type Readiness = 'refuses-until-ready' | 'http-503-until-ready';

interface LaunchPlanBase extends ProcessSpec {
  readonly role: 'server' | 'worker';
  /**
   * Variables to set on top of the agent's environment: the profile's `env`, then
   * `CUDA_VISIBLE_DEVICES` (the chosen indices; the empty string on CPU, so a CPU replica never
   * touches a GPU) and, with GPUs, `CUDA_DEVICE_ORDER=PCI_BUS_ID` so indices mean what
   * nvidia-smi means.
   */
  readonly env: Readonly<Record<string, string>>;
  /** Commands run to completion, in order, with `env`, before `command` (e.g. starting a Ray head). */
  readonly setup: readonly ProcessSpec[];
  /**
   * Commands run to completion, in order, with `env`, once the engine has stopped: when the
   * replica stops and before every restart in place, so what `setup` (or the engine) left
   * running — a Ray head holding the rendezvous port — never outlives an attempt.
   */
  readonly teardown: readonly ProcessSpec[];
}

/** The member that serves the OpenAI API: supervise it, probe its health, scrape its metrics. */
export interface ServerLaunchPlan extends LaunchPlanBase {
  readonly role: 'server';
  readonly port: number;
  readonly healthPath: string;
  readonly readiness: Readiness;
  /** The model's override resolved against the engine's default (see @llmgw/metrics-mappings). */
  readonly metrics: MetricMapping;
}

/** A member of a multi-node replica that serves nothing itself: supervise the process only. */
export interface WorkerLaunchPlan extends LaunchPlanBase {
  readonly role: 'worker';
}

export type LaunchPlan = ServerLaunchPlan | WorkerLaunchPlan;

/** One engine: its capabilities, its profile rules, and how to start it. */
export interface EngineAdapter {
  readonly kind: EngineKind;
  readonly capabilities: EngineCapabilities;
  /** Problems with a profile for this engine, paths relative to the profile (`gpuClass`). */
  validate(profile: Profile): Problem[];
  /**
   * The process for one member of a replica. Pure: same spec, same plan. Throws a DomainError
   * (InvalidArgument, every problem listed) when the spec does not fit the profile: GPU count,
   * rank, missing members, another engine's profile.
   */
  launch(spec: LaunchSpec): LaunchPlan;
}
