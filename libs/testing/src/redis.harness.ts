import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port';
import { spawnProcess, type ExitResult, type SpawnedProcess } from './process.harness';

/** The shared Redis for tests: `LLMGW_TEST_REDIS_URL`, else the local server on 6379. Isolate with a key prefix or db index. */
export function testRedisUrl(): string {
  return process.env['LLMGW_TEST_REDIS_URL'] || 'redis://127.0.0.1:6379';
}

/** A throw-away redis-server owned by one test: nothing kept on disk, gone after stop(). */
export interface RedisServer {
  readonly host: string;
  readonly port: number;
  /** `redis://127.0.0.1:PORT` */
  readonly url: string;
  /** Its working directory, removed on stop. */
  readonly dir: string;
  readonly process: SpawnedProcess;
  /** Graceful stop (SIGTERM, then SIGKILL), removes its directory. Safe to call twice. */
  stop(): Promise<ExitResult>;
  /** Kills it outright, as an outage would. */
  kill9(): Promise<ExitResult>;
}

/** Options for {@link startRedis}. */
export interface StartRedisOptions {
  /** redis-server binary (default: `redis-server` on PATH). */
  binary?: string;
  /** How long start-up may take (default 10 000 ms). */
  deadlineMs?: number;
  /** Port to listen on (default: a free one); the same port as a killed server brings "Redis back". */
  port?: number;
}

/**
 * Starts `redis-server` as a child on a free port bound to 127.0.0.1 (no persistence, not
 * daemonised, so the harness owns and cleans it up) and resolves once it answers PING.
 */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  const host = '127.0.0.1';
  const deadlineMs = options.deadlineMs ?? 10_000;
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-redis-'));
  const port = options.port ?? (await freePort(host));
  let proc: SpawnedProcess;
  try {
    proc = await spawnProcess({
      name: `redis-server :${port}`,
      command: options.binary ?? 'redis-server',
      args: ['--port', String(port), '--bind', host, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', dir],
      readyWhen: { check: () => redisPing(host, port), checkName: 'PING' },
      deadlineMs,
    });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const finish = async (how: () => Promise<ExitResult>): Promise<ExitResult> => {
    try {
      return await how();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  return {
    host,
    port,
    url: `redis://${host}:${port}`,
    dir,
    process: proc,
    stop: () => finish(() => proc.stop('SIGTERM', 5_000)),
    kill9: () => finish(() => proc.kill9()),
  };
}

/** True when a Redis server answers `PING` with `+PONG` on host:port within 1 s. */
export function redisPing(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let reply = '';
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}
