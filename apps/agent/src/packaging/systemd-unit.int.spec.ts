// The packaging the agent ships with: the systemd unit passes `systemd-analyze verify` (and says
// nothing while doing so), keeps engines across agent restarts, and writes only where the
// environment example says the agent keeps its state and cache; the example names only settings
// the agent knows, and its active lines load.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '@llmgw/config';
import { repoRoot } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../config/agent.config';
import { JOIN_REJECTED_EXIT_CODE } from '../connection/controller.connection';
import { testGrpcTlsEnv } from '@llmgw/testing';

const UNIT = join(repoRoot(), 'deploy', 'systemd', 'llmgw-agent.service');
const ENV_EXAMPLE = join(repoRoot(), 'deploy', 'agent.env.example');

/** `Key=value` lines of one section, values of repeated keys in order. */
function section(text: string, name: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('[')) current = line;
    else if (current === `[${name}]` && line && !line.startsWith('#')) {
      const eq = line.indexOf('=');
      const key = line.slice(0, eq);
      out.set(key, [...(out.get(key) ?? []), line.slice(eq + 1)]);
    }
  }
  return out;
}

describe('deploy/systemd/llmgw-agent.service', () => {
  it('passes systemd-analyze verify without a warning (systemd-analyze must be installed: Debian package systemd)', async () => {
    const { code, stdout, stderr } = await new Promise<{ code: number | string; stdout: string; stderr: string }>((resolve) =>
      execFile('systemd-analyze', ['verify', UNIT], { timeout: 60_000 }, (error, out, err) =>
        resolve({ code: error ? ((error as NodeJS.ErrnoException).code ?? 1) : 0, stdout: out, stderr: err }),
      ),
    );
    expect(code, `systemd-analyze verify ${UNIT}\n${stderr}`).toBe(0);
    expect(stderr + stdout).toBe('');
  });

  it('restarts always, keeps engines on restart, hardens, and writes only to the state and cache directories', () => {
    const service = section(readFileSync(UNIT, 'utf8'), 'Service');
    const one = (key: string): string | undefined => service.get(key)?.at(-1);
    expect(one('Restart')).toBe('always');
    expect(one('KillMode')).toBe('process');
    expect(one('RestartPreventExitStatus')).toBe(String(JOIN_REJECTED_EXIT_CODE));
    expect(one('NoNewPrivileges')).toBe('yes');
    expect(one('ProtectSystem')).toBe('strict');
    expect(one('EnvironmentFile')).toBe('/etc/llmgw/agent.env');
    // The built agent (dist/apps/agent installed in /opt/llmgw-agent), no TypeScript loader.
    expect(one('ExecStart')).toBe('/usr/bin/node /opt/llmgw-agent/main.js');
    expect(service.has('PrivateDevices')).toBe(false);

    const env = new Map((service.get('Environment') ?? []).map((e) => e.split('=', 2) as [string, string]));
    const writable = (one('ReadWritePaths') ?? '').split(/\s+/).sort();
    expect(writable).toEqual([env.get('LLMGW_AGENT_CACHE_DIR'), env.get('LLMGW_AGENT_STATE_DIR')].sort());
    expect(one('WorkingDirectory')).toBe(env.get('LLMGW_AGENT_STATE_DIR'));
    // Engine caches land inside the state directory, the only other writable place.
    for (const key of ['HOME', 'TMPDIR', 'RAY_TMPDIR']) expect(env.get(key)?.startsWith(`${env.get('LLMGW_AGENT_STATE_DIR')}/`)).toBe(true);
    // And the agent, configured this way, keeps its state and cache exactly there.
    // (The CA file the env file names lives on the node; the test CA stands in for it.)
    const config = loadConfig(agentConfigSchema, { ...Object.fromEntries(env), LLMGW_GRPC_TLS_CA: testGrpcTlsEnv().LLMGW_GRPC_TLS_CA });
    expect(config.runtime.stateDir).toBe(env.get('LLMGW_AGENT_STATE_DIR'));
    expect(config.discovery.cacheDir).toBe(env.get('LLMGW_AGENT_CACHE_DIR'));
  });
});

describe('deploy/agent.env.example', () => {
  const text = readFileSync(ENV_EXAMPLE, 'utf8');
  const known = new Set(Object.keys(agentConfigSchema.in.shape));

  it('names only settings the agent reads, and every agent setting is documented', () => {
    const named = [...text.matchAll(/^#?\s*([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]);
    expect(named.filter((k) => !known.has(k))).toEqual([]);
    const documented = new Set(named);
    expect([...known].filter((k) => !documented.has(k))).toEqual([]);
  });

  it('its active lines are a valid configuration once the placeholder token is replaced, and the placeholder is refused', () => {
    const active = Object.fromEntries([...text.matchAll(/^([A-Z][A-Z0-9_]+)=(.*)$/gm)].map((m) => [m[1], m[2]]));
    expect(active.LLMGW_AGENT_JOIN_TOKEN).toBe('change-me');
    // TLS to the controller is on: the example names the CA (on the node; the test CA stands in for it here).
    expect(active.LLMGW_GRPC_TLS_CA).toBe('/etc/llmgw/tls/ca.crt');
    expect(active.LLMGW_GRPC_INSECURE).toBeUndefined();
    active.LLMGW_GRPC_TLS_CA = testGrpcTlsEnv().LLMGW_GRPC_TLS_CA;
    expect(() => loadConfig(agentConfigSchema, active)).toThrow(/LLMGW_AGENT_JOIN_TOKEN=<redacted>/);
    const config = loadConfig(agentConfigSchema, { ...active, LLMGW_AGENT_JOIN_TOKEN: '9f2c4e6a8b0d1f3e5a7c9e1b' });
    expect(config.runtime.controllers).toHaveLength(2);
    expect(config.runtime.joinToken).toBe('9f2c4e6a8b0d1f3e5a7c9e1b');
  });
});
