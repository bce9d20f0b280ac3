import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseIpNetwork, type IpNetwork } from '@llmgw/catalog';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SourcePolicy, SourceRefusedError, type SourcePolicySettings } from './source.policy';

const net = (t: string): IpNetwork => parseIpNetwork(t) as IpNetwork;

describe('SourcePolicy (real directories and links)', () => {
  let root: string;
  let models: string;
  let outside: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'llmgw-policy-'));
    models = join(root, 'models');
    outside = join(root, 'outside');
    mkdirSync(join(models, 'sub'), { recursive: true });
    mkdirSync(outside);
    writeFileSync(join(models, 'tiny.gguf'), 'w');
    writeFileSync(join(outside, 'secret'), 's');
    symlinkSync(join(outside, 'secret'), join(models, 'link-out.gguf'));
    symlinkSync(outside, join(models, 'dir-out'));
    symlinkSync(join(models, 'tiny.gguf'), join(models, 'sub', 'link-in.gguf'));
    // A sibling whose name starts with the allowed directory's name.
    mkdirSync(`${models}-evil`);
    writeFileSync(join(`${models}-evil`, 'x.gguf'), 'x');
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const policy = (over: Partial<SourcePolicySettings> = {}) => new SourcePolicy({ schemes: ['https', 'hf'], allowNets: [], dirs: [models], ...over });

  it.each([
    ['file:///etc/shadow', /\/etc\/shadow is not under LLMGW_AGENT_SOURCE_DIRS/],
    ['file://MODELS/link-out.gguf', /link-out\.gguf \(.*outside\/secret once links are resolved\) is not under LLMGW_AGENT_SOURCE_DIRS/],
    ['file://MODELS/dir-out/secret', /once links are resolved\) is not under/],
    ['file://MODELS/../outside/secret', /\. or \.\. segments/],
    ['file://MODELS/%2e%2e/outside/secret', /\. or \.\. segments/],
    ['file://MODELS-evil/x.gguf', /is not under LLMGW_AGENT_SOURCE_DIRS/],
    ['file://MODELS/missing.gguf', /missing\.gguf does not exist on this node/],
    ['http://models.example/x.gguf', /http sources are not accepted \(LLMGW_AGENT_SOURCE_SCHEMES is https,hf\)/],
    ['https://169.254.169.254/latest/meta-data/', /169\.254\.169\.254 is in a refused range \(link-local.*LLMGW_AGENT_SOURCE_ALLOW_NETS/],
    ['https://127.0.0.1:6379/x', /127\.0\.0\.1 is in a refused range \(loopback/],
    ['https://[::ffff:127.0.0.1]/x', /is in a refused range \(loopback/],
    ['https://[fe80::1]/x', /link-local fe80::\/10/],
    ['https://0.0.0.0/x', /unspecified/],
    ['https:///x', /has no host/],
    ['s3://bucket/x', /not a supported source/],
  ])('refuses %s', async (source, reason) => {
    const raw = source.replace('MODELS', models);
    const refused = await policy().admitSource(raw).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SourceRefusedError);
    expect((refused as Error).message).toMatch(reason);
  });

  it('admits a file under a configured directory, links inside it resolved', async () => {
    expect(await policy().admitSource(`file://${models}/tiny.gguf`)).toEqual({ kind: 'file', path: join(models, 'tiny.gguf') });
    expect(await policy().admitSource(`file://${models}/sub/link-in.gguf`)).toEqual({ kind: 'file', path: join(models, 'tiny.gguf') });
    expect(await policy().admitSource(`file://${models}/sub`)).toEqual({ kind: 'file', path: join(models, 'sub') });
  });

  it('no directory configured: no file:// source at all', async () => {
    await expect(policy({ dirs: [] }).admitSource(`file://${models}/tiny.gguf`)).rejects.toThrow(/file:\/\/ sources are not accepted \(LLMGW_AGENT_SOURCE_DIRS is not set\)/);
  });

  it('a localPath from the controller is held to the same directories, plus the cache', async () => {
    await expect(policy().admitLocalPath('/etc/shadow', join(root, 'cache'))).rejects.toThrow(/localPath "\/etc\/shadow" is refused/);
    expect(await policy({ dirs: [] }).admitLocalPath(join(models, 'tiny.gguf'), models)).toBe(join(models, 'tiny.gguf'));
  });

  it('hosts, networks and schemes are allowed only when listed', async () => {
    const listed = policy({ schemes: ['https', 'http'], hosts: ['models.example', '*.mirror.example'], allowNets: [net('127.0.0.1/32'), net('10.0.0.0/8')] });
    await expect(listed.admitSource('https://models.example/x')).resolves.toMatchObject({ kind: 'http' });
    await expect(listed.admitSource('https://eu.mirror.example/x')).resolves.toMatchObject({ kind: 'http' });
    await expect(listed.admitSource('https://other.example/x')).rejects.toThrow(/host other\.example is not in LLMGW_AGENT_SOURCE_HOSTS/);
    await expect(listed.admitSource('hf://acme/tiny@main')).rejects.toThrow(/hf sources are not accepted/);
    const nets = policy({ schemes: ['http'], allowNets: [net('127.0.0.1/32'), net('10.0.0.0/8')] });
    await expect(nets.admitSource('http://127.0.0.1:9/x')).resolves.toMatchObject({ host: '127.0.0.1' });
    await expect(nets.admitSource('http://10.2.3.4/x')).resolves.toMatchObject({ host: '10.2.3.4' });
    await expect(nets.admitSource('http://127.0.0.2/x')).rejects.toThrow(/loopback/);
    await expect(nets.admitSource('http://169.254.169.254/x')).rejects.toThrow(/link-local/);
    expect(nets.addressProblem('::ffff:127.0.0.1')).toBeUndefined();
    expect(nets.addressProblem('8.8.8.8')).toBeUndefined();
    expect(nets.addressProblem('192.168.0.1')).toMatch(/private/);
  });

  it('env: the deny-list always, an allow-list when set', () => {
    expect(policy().envProblems({ LD_PRELOAD: '/x.so', NODE_OPTIONS: '-r x', HF_HOME: '/h', 'BAD=NAME': 'v' })).toEqual([
      expect.stringMatching(/^env LD_PRELOAD may not be set by a catalog/),
      expect.stringMatching(/^env NODE_OPTIONS may not be set by a catalog/),
      expect.stringMatching(/^env BAD=NAME is not a variable name/),
    ]);
    expect(policy({ envAllow: ['HF_*', 'LD_PRELOAD'] }).envProblems({ HF_HOME: '/h', NCCL_DEBUG: 'INFO', LD_PRELOAD: '/x.so' })).toEqual([
      'env NCCL_DEBUG is not in LLMGW_AGENT_PROFILE_ENV_ALLOW (HF_*,LD_PRELOAD)',
      expect.stringMatching(/^env LD_PRELOAD may not be set by a catalog/),
    ]);
  });
});
