import { join, relative } from 'node:path';
import { AppProcess, type AppExit } from './app.process';
import { ensureAdminToken, ensurePrivateDataDir, ensureTinyModel, findOnPath, TINY_MODEL_RELATIVE } from './data-dir.setup';
import { ensureGrpcTls, type GrpcTlsFiles } from './grpc-tls.setup';
import { BUNDLED_LLAMA_SERVER, PORT_VARIABLES, REPO_ROOT, type LauncherConfig } from './launcher.config';
import { writeLocalCatalog } from './local-catalog.writer';
import { APP_LABELS, clientHost, curlExample, LOCAL_APPS, planLocalCluster, type LocalApp, type ResolvedPorts } from './local-cluster.plan';
import { formatLogLine, formatOwnLine, type LogFormatOptions } from './log-line.formatter';
import { checkPorts, pickFreePort } from './port.checker';
import { describeProcess, ProcessTreeTracker } from './process-tree';
import { decideRestart, DEFAULT_RESTART_POLICY } from './restart.policy';
import { probeServing } from './serving.probe';

/** Where output goes and what the launcher may read; the real process in main.ts, fakes nowhere (tests run the real thing). */
export interface LauncherIo {
  readonly write: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly color: boolean;
  readonly execPath: string;
}

/** How often the process tree is re-read, so engines orphaned by a crashed agent stay known. */
const TREE_REFRESH_MS = 1_000;
/** Time between readiness probes. */
const PROBE_INTERVAL_MS = 1_000;
/** Extra time past the apps' own shutdown deadline before their groups are SIGKILLed. */
const KILL_MARGIN_MS = 3_000;
/** Grace given to processes the apps left behind (engines) between SIGTERM and SIGKILL. */
const LEFTOVER_GRACE_MS = 5_000;
/**
 * A second signal this soon after the first is the same Ctrl-C delivered twice — `npm start`
 * forwards the terminal's SIGINT to the launcher, which got it from the terminal already — not
 * an impatient user asking to kill everything.
 */
const DUPLICATE_SIGNAL_MS = 1_500;
/** Progress lines while waiting: at most one per this interval, and only when the reason changes. */
const PROGRESS_EVERY_MS = 10_000;

/**
 * Runs the local cluster: prepares the data directory (tiny model, catalog, admin token), checks
 * the ports, starts controller, catalog API, router and agent as separate processes with one
 * prefixed log stream, waits until a completion works and prints how to call it, restarts an app
 * that dies (with backoff; repeated fast failures stop everything), and on SIGINT/SIGTERM stops
 * everything — engines included — before resolving with the exit code
 * (0: every app stopped cleanly after a stop request).
 */
export class LocalClusterLauncher {
  readonly #apps = new Map<LocalApp, AppProcess>();
  readonly #tree = new ProcessTreeTracker();
  readonly #fmt: LogFormatOptions;
  #stopping: Promise<number> | undefined;
  #stopRequested = false;
  #treeTimer: NodeJS.Timeout | undefined;
  #firstSignalAt: number | undefined;
  /** Set when an app ended on its own: the run ends with status 1 whatever the app's exit code. */
  #unexpectedExit = false;
  #onStopped: ((code: number) => void) | undefined;
  /** When each app ended without being asked to (performance.now()), for the restart policy. */
  readonly #exitsAt = new Map<LocalApp, number[]>();
  /** Restarts waiting for their backoff; cleared when the cluster stops. */
  readonly #restartTimers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly config: LauncherConfig,
    private readonly io: LauncherIo,
  ) {
    this.#fmt = { color: io.color, prefixWidth: Math.max(...LOCAL_APPS.map((a) => APP_LABELS[a].length), 'llmgw'.length) };
  }

  /** Runs until stopped; resolves with the process exit code. */
  async run(): Promise<number> {
    let prepared: Awaited<ReturnType<LocalClusterLauncher['prepare']>>;
    try {
      prepared = await this.prepare();
    } catch (error) {
      this.say(`cannot start: ${(error as Error).message}`);
      return 1;
    }
    if (this.#stopRequested) return 0;
    const { ports, model, baseUrl } = prepared;

    this.start(prepared.launches);
    const host = clientHost(this.config.host);
    this.say(`OpenAI base URL: ${baseUrl}`);
    this.say(`controller admin API http://${host}:${ports.controller}, catalog API http://${host}:${ports.catalog}; admin token in ${this.show(prepared.tokenFile)}`);
    this.say(`waiting for a replica of ${model} to answer (up to ${Math.round(this.config.readyTimeoutMs / 1000)} s) ...`);

    const started = performance.now();
    const outcome = await this.waitUntilServing(baseUrl, model, started);
    if (outcome === 'stopped') return this.#stopping ?? this.stop('stop requested');
    if (outcome !== 'ready') {
      this.say(`not ready: ${outcome}`);
      const code = await this.stop('startup failed');
      return code === 0 ? 1 : code;
    }
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    this.io.write(
      `\n${formatOwnLine(`ready in ${seconds} s: ${model} is served at ${baseUrl}. Try:`, this.#fmt)}\n\n` +
        `${curlExample(baseUrl, model)}\n\n` +
        `${formatOwnLine('Ctrl-C stops everything.', this.#fmt)}\n\n`,
    );
    return this.#stopping ?? new Promise<number>((resolve) => (this.#onStopped = resolve));
  }

  /**
   * Stops every app — SIGTERM to each process group, router, catalog API and agent before the
   * controller; SIGKILL past the shutdown deadline — and whatever they left running (engines).
   * Idempotent: a call while stopping returns the same promise. Resolves with the exit code.
   */
  stop(reason: string): Promise<number> {
    this.#stopRequested = true;
    if (this.#stopping) return this.#stopping;
    this.#stopping = this.stopAll(reason).then((code) => {
      this.#onStopped?.(code);
      return code;
    });
    return this.#stopping;
  }

  /** SIGINT/SIGTERM: the first stops cleanly; another one later (not a duplicate delivery) kills everything at once. */
  onSignal(signal: NodeJS.Signals): void {
    const now = performance.now();
    if (this.#firstSignalAt === undefined) {
      this.#firstSignalAt = now;
      void this.stop(`${signal} received`);
      return;
    }
    if (now - this.#firstSignalAt < DUPLICATE_SIGNAL_MS) return;
    this.say(`${signal} again: killing everything now`);
    for (const app of this.#apps.values()) app.signalGroup('SIGKILL');
    this.#tree.signalAll('SIGKILL');
  }

  private async prepare() {
    const { config } = this;
    const dataDir = config.dataDir;
    const { narrowed } = ensurePrivateDataDir(dataDir);
    this.say(`data directory ${dataDir}${narrowed ? ' (narrowed to mode 0700: it holds the store and the tokens)' : ''}`);

    // 1. Ports: a 0 becomes a free port now, so every app can be told where the others are.
    const ports = {} as Record<keyof ResolvedPorts, number>;
    for (const key of Object.keys(config.ports) as (keyof ResolvedPorts)[]) {
      ports[key] = config.ports[key] === 0 ? await pickFreePort(config.host) : config.ports[key];
    }
    const problems = await checkPorts(
      config.host,
      (Object.keys(ports) as (keyof ResolvedPorts)[]).map((key) => ({ port: ports[key], variable: PORT_VARIABLES[key], app: portOwner(key) })),
    );
    if (problems.length > 0) throw new Error(problems.length === 1 ? problems[0] : `\n  ${problems.join('\n  ')}`);

    // 2. The tiny model, then the catalog that points at it.
    const modelFile = join(dataDir, TINY_MODEL_RELATIVE);
    const tiny = ensureTinyModel(modelFile, REPO_ROOT, this.io.execPath);
    this.say(`${tiny.created ? 'generated' : 'using'} model file ${this.show(modelFile)} (${tiny.bytes} bytes)`);
    const catalogFile = join(dataDir, 'catalog.yaml');
    const rendered = writeLocalCatalog(config.catalogTemplate, catalogFile, { LLMGW_DATA_DIR: dataDir });
    const model = rendered.catalog.models[0].name;
    this.say(`catalog ${this.show(config.catalogTemplate)} -> ${this.show(catalogFile)}: ${rendered.catalog.models.map((m) => m.name).join(', ')}`);

    // 3. The admin token (controller admin API and catalog API). Which llama.cpp executable runs is the agent's choice; say it.
    const tokenFile = join(dataDir, 'admin-token');
    const token = ensureAdminToken(tokenFile);
    // The controller refuses to start without a join and a router token: the launcher keeps its own beside the admin token.
    const joinToken = ensureAdminToken(join(dataDir, 'join-token'));
    const routerToken = ensureAdminToken(join(dataDir, 'router-token'));
    // 4. gRPC TLS: a local CA and the controller's certificate, made once and reused while they fit the host.
    let grpcTls: GrpcTlsFiles | undefined;
    if (config.grpcInsecure) this.say('LLMGW_GRPC_INSECURE=true: gRPC between the apps runs in clear, without certificates');
    else {
      grpcTls = await ensureGrpcTls(dataDir, config.host, new Date());
      const what = { reused: 'reusing', issued: 'issued a new controller certificate from', created: 'created' }[grpcTls.outcome];
      this.say(`gRPC over TLS: ${what} the local CA ${this.show(grpcTls.caFile)}`);
    }
    // Which llama.cpp executable the agent runs is chosen here and given to it: the agent looks for nothing on disk.
    const llamaServer = this.io.env.LLMGW_AGENT_LLAMA_SERVER || findOnPath('llama-server', this.io.env.PATH) || join(REPO_ROOT, BUNDLED_LLAMA_SERVER);
    this.say(llamaServer.endsWith(BUNDLED_LLAMA_SERVER) ? 'no llama-server on PATH: llama.cpp replicas run on the bundled node-llama-cpp engine (CPU)' : `llama.cpp replicas run on ${llamaServer}`);

    const launches = planLocalCluster(
      { repoRoot: REPO_ROOT, dataDir, host: config.host, ports, catalogFile, adminToken: token, joinToken, routerToken, grpcTls, llamaServer, userEnv: this.io.env },
      this.io.execPath,
    );
    const baseUrl = `http://${clientHost(config.host)}:${ports.router}/v1`;
    return { ports, model, baseUrl, launches, tokenFile };
  }

  private start(launches: ReturnType<typeof planLocalCluster>): void {
    this.say(`starting ${launches.map((l) => APP_LABELS[l.app]).join(', ')}`);
    for (const [index, launch] of launches.entries()) this.spawn(launch, index);
    this.#tree.refresh();
    this.#treeTimer = setInterval(() => this.#tree.refresh(), TREE_REFRESH_MS);
  }

  /**
   * Starts one app and watches it: an exit nobody asked for restarts it after the restart
   * policy's backoff (engines keep running meanwhile; a restarted agent adopts them), and only
   * repeated fast failures, or an app saying it cannot work with its settings, stop everything.
   */
  private spawn(launch: ReturnType<typeof planLocalCluster>[number], index: number): void {
    const label = APP_LABELS[launch.app];
    const fmt = { ...this.#fmt, colorIndex: index };
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...this.io.env, ...launch.env })) if (v !== undefined) env[k] = v;
    const proc = new AppProcess({ name: label, command: launch.command, args: launch.args, env }, (_stream, line) => {
      const shown = formatLogLine(label, line, fmt);
      if (shown !== undefined) this.io.write(`${shown}\n`);
    });
    this.#apps.set(launch.app, proc);
    if (proc.pid !== undefined) {
      this.#tree.addRoot(proc.pid);
      this.say(`${label} started (pid ${proc.pid}; \`kill ${proc.pid}\` restarts it)`);
    }
    void proc.exited.then((exit) => {
      if (this.#stopRequested) return;
      const now = performance.now();
      const earlier = this.#exitsAt.get(launch.app) ?? [];
      const decision = decideRestart(earlier, now, exit.code);
      this.#exitsAt.set(launch.app, [...earlier, now]);
      if (!decision.restart) {
        this.#unexpectedExit = true;
        this.say(`${label} exited unexpectedly (${describeExit(exit)}) and is not restarted: ${decision.reason}; stopping everything`);
        void this.stop(`${label} exited`);
        return;
      }
      this.say(`${label} exited unexpectedly (${describeExit(exit)}); restarting it in ${(decision.delayMs / 1000).toFixed(0)} s (exit ${decision.recentExits} within ${DEFAULT_RESTART_POLICY.windowMs / 1000} s)`);
      const timer = setTimeout(() => {
        this.#restartTimers.delete(timer);
        if (!this.#stopRequested) this.spawn(launch, index);
      }, decision.delayMs);
      this.#restartTimers.add(timer);
    });
  }

  private async waitUntilServing(baseUrl: string, model: string, started: number): Promise<'ready' | 'stopped' | string> {
    let lastReason = '';
    let lastSaid = started;
    for (;;) {
      if (this.#stopRequested) return 'stopped';
      const result = await probeServing(baseUrl, model);
      if (this.#stopRequested) return 'stopped';
      if (result.ready) return 'ready';
      const now = performance.now();
      if (now - started > this.config.readyTimeoutMs) {
        return `no replica of ${model} answered within ${Math.round(this.config.readyTimeoutMs / 1000)} s (last: ${result.reason}); set LLMGW_LAUNCHER_READY_TIMEOUT to wait longer`;
      }
      if (result.reason !== lastReason && now - lastSaid > PROGRESS_EVERY_MS) {
        this.say(`still waiting (${Math.round((now - started) / 1000)} s): ${result.reason}`);
        lastReason = result.reason;
        lastSaid = now;
      }
      await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
    }
  }

  private async stopAll(reason: string): Promise<number> {
    const apps = [...this.#apps.entries()];
    if (apps.length === 0) return 0;
    this.say(`${reason}: stopping ${apps.map(([a]) => APP_LABELS[a]).join(', ')}`);
    this.#tree.refresh();
    if (this.#treeTimer) clearInterval(this.#treeTimer);
    for (const timer of this.#restartTimers) clearTimeout(timer);
    this.#restartTimers.clear();
    const roots = new Set(apps.map(([, p]) => p.pid).filter((pid): pid is number => pid !== undefined));
    const alreadyExited = new Set(apps.filter(([, p]) => p.exit !== undefined).map(([a]) => a));

    // 1. Router, catalog API and agent first, while the controller still hears their last words
    //    (the router's final usage report); each has its own deadline (LLMGW_SHUTDOWN_TIMEOUT).
    const first = await this.stopApps(apps.filter(([app]) => app !== 'controller'));
    // 2. The controller, and meanwhile what the apps left behind: engines live in process groups
    //    of their own and outlive their agent by design.
    const [last] = await Promise.all([this.stopApps(apps.filter(([app]) => app === 'controller')), this.stopLeftovers(roots)]);

    const exits = [...first, ...last];
    const bad = exits.filter(({ app, exit, killed }) => killed || (!alreadyExited.has(app) && exit.code !== 0));
    const crashed = exits.filter(({ app, exit }) => alreadyExited.has(app) && exit.code !== 0);
    for (const { app, exit } of bad) this.say(`${APP_LABELS[app]} did not stop cleanly (${describeExit(exit)})`);
    const clean = bad.length + crashed.length === 0 && !this.#unexpectedExit;
    this.say(clean ? 'stopped' : 'stopped, with errors');
    return clean ? 0 : 1;
  }

  /** SIGTERM to each app's group at once; SIGKILL past the deadline; then SIGKILL whatever of their groups remains. */
  private async stopApps(apps: readonly [LocalApp, AppProcess][]): Promise<{ app: LocalApp; exit: AppExit; killed: boolean }[]> {
    for (const [, proc] of apps) if (proc.exit === undefined) proc.signalGroup('SIGTERM');
    const deadline = this.config.shutdownTimeoutMs + KILL_MARGIN_MS;
    const exits = await Promise.all(
      apps.map(async ([app, proc]) => {
        const exit = await Promise.race([proc.exited, sleep(deadline).then(() => undefined)]);
        if (exit !== undefined) return { app, exit, killed: false };
        this.say(`${APP_LABELS[app]} did not stop within ${Math.round(deadline / 1000)} s: killing it`);
        proc.signalGroup('SIGKILL');
        return { app, exit: await proc.exited, killed: true };
      }),
    );
    for (const [, proc] of apps) proc.signalGroup('SIGKILL');
    return exits;
  }

  /** Stops every process started below the apps that still runs (not the apps themselves): SIGTERM, then SIGKILL after a grace. */
  private async stopLeftovers(roots: ReadonlySet<number>): Promise<void> {
    const left = this.#tree.alive().filter((p) => !roots.has(p.pid));
    if (left.length === 0) return;
    this.say(`stopping what the agent left running: ${left.map((p) => `${p.pid} (${describeProcess(p.pid) ?? p.comm})`).join(', ')}`);
    this.#tree.signalAll('SIGTERM', roots);
    const end = performance.now() + LEFTOVER_GRACE_MS;
    while (performance.now() < end && this.#tree.alive().some((p) => !roots.has(p.pid))) await sleep(100);
    const stubborn = this.#tree.signalAll('SIGKILL', roots);
    if (stubborn.length > 0) this.say(`killed ${stubborn.map((p) => p.pid).join(', ')}: still running ${LEFTOVER_GRACE_MS / 1000} s after SIGTERM`);
  }

  private say(text: string): void {
    this.io.write(`${formatOwnLine(text, this.#fmt)}\n`);
  }

  /** A path as short as it can be shown: relative to the working directory when inside it. */
  private show(path: string): string {
    const rel = relative(process.cwd(), path);
    return rel !== '' && !rel.startsWith('..') ? rel : path;
  }
}

function portOwner(key: keyof ResolvedPorts): string {
  return key === 'controllerGrpc' ? 'controller (gRPC)' : key === 'catalog' ? 'catalog API' : key;
}

function describeExit(exit: AppExit): string {
  return exit.signal !== null ? `signal ${exit.signal}` : `exit code ${exit.code}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
