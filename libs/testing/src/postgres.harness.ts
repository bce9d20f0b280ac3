import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, chownSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port';

/** Options for {@link startPostgres}. */
export interface PostgresServerOptions {
  /** Folder holding initdb/pg_ctl; default the highest version under /usr/lib/postgresql. */
  binDir?: string;
}

/**
 * The bin folder of the newest PostgreSQL installed as /usr/lib/postgresql/<version>/bin,
 * or undefined when none is (then pass `binDir` explicitly).
 */
export function findPostgresBinDir(root = '/usr/lib/postgresql'): string | undefined {
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => /^\d+(\.\d+)?$/.test(v) && existsSync(join(root, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0], 'bin') : undefined;
}

const live = new Set<PostgresServer>();
let exitHookInstalled = false;

/**
 * A throw-away PostgreSQL server for tests that must stop, kill or restart the database (store
 * outages): its own data folder in a temp dir, trust auth for `postgres`, 127.0.0.1 on a free
 * port, fsync off. Always `close()` it (stops the server and deletes the folder); a process
 * that exits without closing kills it with SIGKILL on the way out.
 */
export class PostgresServer {
  private running = false;

  private constructor(
    readonly binDir: string,
    /** Temp folder: `data/` (the cluster), the server log and the Unix socket. */
    readonly dir: string,
    readonly port: number,
    private readonly asPostgresUser: boolean,
  ) {}

  /** Connection URL of the `postgres` database as the `postgres` superuser. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get dataDir(): string {
    return join(this.dir, 'data');
  }

  get logFile(): string {
    return join(this.dir, 'server.log');
  }

  /** Whether the server was last started and not stopped or killed since. */
  isRunning(): boolean {
    return this.running;
  }

  /** initdb in a fresh temp folder, then start on a free port (about 1.5 s). */
  static async create(options: PostgresServerOptions = {}): Promise<PostgresServer> {
    const binDir = options.binDir ?? findPostgresBinDir();
    if (binDir === undefined || !existsSync(join(binDir, 'initdb'))) {
      throw new Error(`PostgresServer: no PostgreSQL binaries (looked in ${binDir ?? '/usr/lib/postgresql/*/bin'}); install postgresql or pass binDir`);
    }
    const asPostgresUser = process.getuid?.() === 0;
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-pg-'));
    if (asPostgresUser) {
      // initdb refuses to run as root: the folder belongs to postgres and commands run as it.
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(dir, uid, gid);
    }
    let server: PostgresServer | undefined;
    try {
      const port = await freePort();
      server = new PostgresServer(binDir, dir, port, asPostgresUser);
      track(server);
      await server.run('initdb', ['-D', server.dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '--no-sync']);
      await server.start();
      return server;
    } catch (error) {
      if (server) await server.close();
      else rmSync(dir, { recursive: true, force: true });
      throw error;
    }
  }

  /** Starts the server again on the same port and data (after stop() or kill()); waits until it accepts connections. */
  async start(): Promise<void> {
    if (this.running) return;
    const options = `-c listen_addresses=127.0.0.1 -p ${this.port} -c unix_socket_directories=${this.dir} -c fsync=off`;
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        await this.run('pg_ctl', ['-D', this.dataDir, '-l', this.logFile, '-w', '-t', '15', 'start', '-o', options]);
        break;
      } catch (error) {
        // After kill(), orphaned backends may hold the old shared memory for a moment.
        if (Date.now() > deadline) throw new Error(`${(error as Error).message}\n--- server log ---\n${this.logTail()}`);
        await delay(100);
      }
    }
    this.running = true;
  }

  /** Fast shutdown (`pg_ctl -m fast -w stop`): open connections are cut, the data stays. */
  async stop(): Promise<void> {
    if (!this.running) return;
    await this.run('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', '-t', '15', 'stop']);
    this.running = false;
  }

  /** stop() then start(). */
  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** SIGKILL to the postmaster, like a crash or power loss; waits until the port refuses connections. */
  async kill(): Promise<void> {
    if (!this.running) return;
    const pid = this.postmasterPid();
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    this.running = false;
    const deadline = Date.now() + 10_000;
    while ((pid !== undefined && alive(pid)) || (await accepts(this.port))) {
      if (Date.now() > deadline) throw new Error(`PostgresServer.kill: server on port ${this.port} still up after 10 s`);
      await delay(25);
    }
  }

  /** Stops the server (killing it if a fast stop fails) and deletes its folder. Safe to call twice. */
  async close(): Promise<void> {
    try {
      await this.stop();
    } catch {
      await this.kill().catch(() => undefined);
    }
    live.delete(this);
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** The end of the server log, for error messages. */
  logTail(lines = 30): string {
    try {
      return readFileSync(this.logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no server log)';
    }
  }

  /** Synchronous last resort used at process exit. */
  killSync(): void {
    const pid = this.postmasterPid();
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private postmasterPid(): number | undefined {
    try {
      const pid = Number(readFileSync(join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  private run(binary: string, args: string[]): Promise<string> {
    const bin = join(this.binDir, binary);
    const [command, argv] = this.asPostgresUser ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
    return new Promise((resolve, reject) => {
      execFile(command, argv, { cwd: this.dir, timeout: 60_000, encoding: 'utf8' }, (error, stdout, stderr) => {
        if (error) reject(new Error(`PostgresServer: ${binary} ${args.join(' ')} failed: ${error.message}\n${stderr}`));
        else resolve(stdout);
      });
    });
  }
}

/** A new throw-away PostgreSQL server, started and accepting connections; `close()` it when done. */
export function startPostgres(options: PostgresServerOptions = {}): Promise<PostgresServer> {
  return PostgresServer.create(options);
}

function track(server: PostgresServer): void {
  live.add(server);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const s of live) s.killSync();
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
