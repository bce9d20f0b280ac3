import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port';
import { spawnProcess, type SpawnedProcess } from './process.harness';
import { repoRoot } from './repo-paths';

/** Debian's nginx binary (`apt-get install nginx`); tools/scripts/test-prereqs.sh installs it. */
export const NGINX_BINARY = '/usr/sbin/nginx';

/** A throw-away nginx prefix running deploy/nginx/llmgw.conf in front of the given routers. */
export interface NginxPrefix {
  readonly dir: string;
  /** The main config file (an `http` block including the deploy file). */
  readonly config: string;
  readonly port: number;
  remove(): void;
}

/**
 * Writes a prefix directory that runs the repository's `deploy/nginx/llmgw.conf` unchanged but for
 * two lines: the routers' include file points at one listing `routers` (`host:port` each, with
 * the deploy file's `max_fails`/`fail_timeout`), and `listen 8000` becomes 127.0.0.1 on a free port.
 * Temporary paths, pid and logs stay inside the prefix, so it runs unprivileged and beside others.
 */
export async function nginxPrefix(routers: readonly string[]): Promise<NginxPrefix> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-nginx-'));
  // Workers of a root master run as nobody: they must be able to write the temporary paths.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const deploy = readFileSync(join(repoRoot(), 'deploy', 'nginx', 'llmgw.conf'), 'utf8');
  const upstream = join(dir, 'llmgw-routers.upstream');
  const site = deploy.replace('include /etc/nginx/llmgw-routers.upstream;', `include ${upstream};`).replace('listen 8000;', `listen 127.0.0.1:${port};`);
  if (!site.includes(upstream) || !site.includes(`127.0.0.1:${port}`)) throw new Error('deploy/nginx/llmgw.conf: the include or listen line the test rewrites is gone');
  writeFileSync(upstream, routers.map((r) => `server ${r} max_fails=1 fail_timeout=5s;\n`).join(''));
  writeFileSync(join(dir, 'llmgw.conf'), site);
  const config = join(dir, 'nginx.conf');
  writeFileSync(
    config,
    [
      'worker_processes 1;',
      `pid ${dir}/nginx.pid;`,
      `error_log ${dir}/error.log info;`,
      'events { worker_connections 4096; }',
      'http {',
      `  access_log ${dir}/access.log;`,
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${dir}/${t}-temp;`),
      `  include ${dir}/llmgw.conf;`,
      '}',
      '',
    ].join('\n'),
  );
  return { dir, config, port, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `nginx -t` on a prefix: what it printed; throws with that when nginx refuses the configuration. */
export function nginxTest(prefix: NginxPrefix): string {
  const r = spawnSync(NGINX_BINARY, ['-t', '-p', prefix.dir, '-c', prefix.config], { encoding: 'utf8' });
  const output = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  if (r.error) throw new Error(`cannot run ${NGINX_BINARY}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`nginx -t refused the configuration: ${output}`);
  return output;
}

/** Runs nginx in the foreground on a prefix; ready once its port takes connections. */
export function startNginx(prefix: NginxPrefix): Promise<SpawnedProcess> {
  return spawnProcess({
    command: NGINX_BINARY,
    args: ['-p', prefix.dir, '-c', prefix.config, '-g', 'daemon off;'],
    name: 'nginx',
    readyWhen: {
      check: () =>
        new Promise<boolean>((resolve) => {
          const socket = connect(prefix.port, '127.0.0.1');
          socket.once('connect', () => {
            socket.destroy();
            resolve(true);
          });
          socket.once('error', () => resolve(false));
        }),
      checkName: `nginx listening on 127.0.0.1:${prefix.port}`,
    },
    deadlineMs: 15_000,
  });
}
