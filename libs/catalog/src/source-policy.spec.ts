import { describe, expect, it } from 'vitest';
import { validateCatalogSpec } from './catalog-spec.validator';
import { hostProblem, inNetwork, parseIp, parseIpNetwork, parseWeightsSource, profileEnvProblem, refusedAddressRange, type IpNetwork } from './source-policy';

describe('parseWeightsSource', () => {
  it.each([
    ['file:///models/tiny.gguf', { kind: 'file', path: '/models/tiny.gguf' }],
    ['file:///models/my%20model.gguf', { kind: 'file', path: '/models/my model.gguf' }],
    ['https://Host.Example:8443/m/x.gguf', { kind: 'http', url: 'https://host.example:8443/m/x.gguf', scheme: 'https', host: 'host.example' }],
    ['http://[2606:4700::1]/x', { kind: 'http', url: 'http://[2606:4700::1]/x', scheme: 'http', host: '2606:4700::1' }],
    ['hf://acme/tiny/sub/model.gguf@v1.0', { kind: 'hf-file', repo: 'acme/tiny', file: 'sub/model.gguf', revision: 'v1.0' }],
    ['hf://acme/tiny@main', { kind: 'hf-repo', repo: 'acme/tiny', revision: 'main' }],
  ])('accepts %s', (raw, source) => {
    expect(parseWeightsSource(raw)).toEqual({ ok: true, source });
  });

  it.each([
    ['file://relative/x', /absolute path/],
    ['file:///', /absolute path/],
    ['file://host/etc/passwd', /absolute path/],
    ['file:///models/../etc/passwd', /\. or \.\. segments/],
    ['file:///a/%2e%2e/etc/passwd', /\. or \.\. segments/],
    ['file:///a/%2E%2e/etc/passwd', /\. or \.\. segments/],
    ['file:///a/.%2e/etc/passwd', /\. or \.\. segments/],
    ['file:///a%2f..%2fetc/passwd', /\. or \.\. segments/],
    ['file:///a/./b', /\. or \.\. segments/],
    ['file:///a/%zz', /malformed percent-escape/],
    ['file:///a/%00b', /control characters/],
    ['file:///a/b%0a', /control characters/],
    ['file:///a/b?x=1', /\? or #/],
    ['http:///x', /has no host/],
    ['https:///x/y', /has no host/],
    ['http://', /has no host/],
    ['http://\\evil.example/x', /backslashes/],
    ['http://evil.example\\@good.example/x', /backslashes/],
    ['https://user:pw@host.example/x', /credentials/],
    ['https://host.example/x y', /spaces or control/],
    ['https://host.example/x\ty', /spaces or control/],
    ['hf://acme/tiny', /hf:\/\/org\/repo\[\/file\]@revision/],
    ['hf://acme/tiny/../x@main', /\. or \.\. segments/],
    ['s3://bucket/x', /not a supported source/],
    ['ftp://host.example/x', /not a supported source/],
    ['gopher://127.0.0.1:6379/_FLUSHALL', /not a supported source/],
  ])('refuses %s', (raw, reason) => {
    const parsed = parseWeightsSource(raw);
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? '' : parsed.reason).toMatch(reason);
  });
});

describe('refusedAddressRange', () => {
  it.each([
    ['127.0.0.1', 'loopback 127.0.0.0/8'],
    ['127.255.1.2', 'loopback 127.0.0.0/8'],
    ['169.254.169.254', 'link-local (cloud metadata lives here) 169.254.0.0/16'],
    ['10.1.2.3', 'private 10.0.0.0/8'],
    ['172.16.0.1', 'private 172.16.0.0/12'],
    ['172.31.255.255', 'private 172.16.0.0/12'],
    ['192.168.1.1', 'private 192.168.0.0/16'],
    ['100.64.0.1', 'shared address space (carrier-grade NAT) 100.64.0.0/10'],
    ['0.0.0.0', 'unspecified ("this network") 0.0.0.0/8'],
    ['224.0.0.1', 'multicast 224.0.0.0/4'],
    ['255.255.255.255', 'reserved (broadcast included) 240.0.0.0/4'],
    ['198.18.0.1', 'benchmarking 198.18.0.0/15'],
    ['::1', 'loopback ::1/128'],
    ['[::1]', 'loopback ::1/128'],
    ['::', 'unspecified ::/128'],
    ['fe80::1', 'link-local fe80::/10'],
    ['fe80::1%eth0', 'link-local fe80::/10'],
    ['febf:ffff::1', 'link-local fe80::/10'],
    ['fc00::1', 'private (unique local) fc00::/7'],
    ['fd12:3456::1', 'private (unique local) fc00::/7'],
    ['ff02::1', 'multicast ff00::/8'],
    ['::ffff:127.0.0.1', 'loopback 127.0.0.0/8 (inside the IPv6 form ::ffff:0:0/96)'],
    ['::ffff:7f00:1', 'loopback 127.0.0.0/8 (inside the IPv6 form ::ffff:0:0/96)'],
    ['::ffff:a9fe:a9fe', 'link-local (cloud metadata lives here) 169.254.0.0/16 (inside the IPv6 form ::ffff:0:0/96)'],
    ['::127.0.0.1', 'loopback 127.0.0.0/8 (inside the IPv6 form ::/96)'],
    ['64:ff9b::a9fe:a9fe', 'link-local (cloud metadata lives here) 169.254.0.0/16 (inside the IPv6 form 64:ff9b::/96)'],
    ['2002:7f00:1::', 'loopback 127.0.0.0/8 (inside the IPv6 form 2002::/16)'],
    ['2001:db8::1', 'documentation 2001:db8::/32'],
  ])('%s is %s', (address, range) => {
    expect(refusedAddressRange(address)).toBe(range);
  });

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '192.169.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8', '2002:808:808::', 'example.com', '1.2.3', ''])(
    '%s is not refused (public, or not an address)',
    (address) => {
      expect(refusedAddressRange(address)).toBeUndefined();
    },
  );

  it('networks match addresses of their family, IPv4-mapped IPv6 as IPv4', () => {
    const net = (t: string) => parseIpNetwork(t) as IpNetwork;
    const ip = (t: string) => parseIp(t) as NonNullable<ReturnType<typeof parseIp>>;
    expect(inNetwork(ip('127.0.0.1'), net('127.0.0.1/32'))).toBe(true);
    expect(inNetwork(ip('127.0.0.2'), net('127.0.0.1/32'))).toBe(false);
    expect(inNetwork(ip('::ffff:127.0.0.1'), net('127.0.0.1'))).toBe(true);
    expect(inNetwork(ip('10.9.8.7'), net('10.0.0.0/8'))).toBe(true);
    expect(inNetwork(ip('fd00::5'), net('fd00::/8'))).toBe(true);
    expect(inNetwork(ip('::1'), net('127.0.0.0/8'))).toBe(false);
    expect(parseIpNetwork('10.0.0.0/33')).toBeUndefined();
    expect(parseIpNetwork('10.0.0.0/8/1')).toBeUndefined();
    expect(parseIpNetwork('host.example')).toBeUndefined();
  });
});

describe('hostProblem', () => {
  it.each([
    ['localhost', /names the node itself/],
    ['LOCALHOST.', /names the node itself/],
    ['api.localhost', /names the node itself/],
    ['ip6-localhost', /names the node itself/],
    ['169.254.169.254', /refused range \(link-local/],
    ['[::1]', /refused range \(loopback/],
  ])('%s', (host, reason) => {
    expect(hostProblem(host)).toMatch(reason);
  });

  it('a public address or any other name is left to the agent', () => {
    expect(hostProblem('huggingface.co')).toBeUndefined();
    expect(hostProblem('93.184.215.14')).toBeUndefined();
  });
});

describe('profileEnvProblem', () => {
  it.each([
    'LD_PRELOAD',
    'LD_LIBRARY_PATH',
    'LD_AUDIT',
    'ld_preload',
    'DYLD_INSERT_LIBRARIES',
    'NODE_OPTIONS',
    'PYTHONPATH',
    'PYTHONHOME',
    'PYTHONSTARTUP',
    'PYTHONWARNINGS',
    'BASH_ENV',
    'ENV',
    'PATH',
    'HOME',
    'GCONV_PATH',
    'GLIBC_TUNABLES',
    'OPENSSL_CONF',
    'HTTPS_PROXY',
    'SSL_CERT_FILE',
    'NCCL_NET_PLUGIN',
    'LLMGW_AGENT_JOIN_TOKEN',
  ])('refuses %s', (name) => {
    expect(profileEnvProblem(name)).toMatch(/may not be set by a catalog/);
  });

  it.each(['LD', 'HF_HOME', 'NCCL_DEBUG', 'VLLM_LOGGING_LEVEL', 'PYTHONUNBUFFERED', 'OMP_NUM_THREADS', 'ENVIRONMENT'])('allows %s', (name) => {
    expect(profileEnvProblem(name)).toBeUndefined();
  });

  it.each(['PATH=/x', 'A B', '', '1X'])('refuses the malformed name %j', (name) => {
    expect(profileEnvProblem(name)).toMatch(/not a variable name/);
  });
});

describe('the catalog validator refuses the same, with paths', () => {
  const doc = (model: Record<string, unknown>, profile: Record<string, unknown> = {}) => ({
    models: [{ name: 'm', source: 'https://models.example/m.gguf', size: '1MB', replicas: 1, profiles: [{ engine: 'llamacpp' }, { engine: 'llamacpp', ...profile }], ...model }],
  });
  const problems = (d: unknown) => validateCatalogSpec(d).problems;

  it.each([
    ['an env on the deny-list', doc({}, { env: { LD_PRELOAD: '/tmp/x.so' } }), 'models[0].profiles[1].env.LD_PRELOAD', /may not be set by a catalog \(LD_\* is refused/],
    ['NODE_OPTIONS', doc({}, { env: { NODE_OPTIONS: '--require /tmp/x.js' } }), 'models[0].profiles[1].env.NODE_OPTIONS', /NODE_OPTIONS is refused/],
    ['PYTHONPATH', doc({}, { env: { PYTHONPATH: '/tmp' } }), 'models[0].profiles[1].env.PYTHONPATH', /PYTHONPATH is refused/],
    ['the metadata address', doc({ source: 'http://169.254.169.254/latest/meta-data/' }), 'models[0].source', /host 169\.254\.169\.254 is in a refused range \(link-local/],
    ['a loopback address', doc({ source: 'http://127.0.0.1:6379/x' }), 'models[0].source', /host 127\.0\.0\.1 is in a refused range \(loopback/],
    ['a loopback address in another spelling', doc({ source: 'http://2130706433/x' }), 'models[0].source', /host 127\.0\.0\.1 is in a refused range \(loopback/],
    ['an IPv6 loopback', doc({ source: 'http://[::1]/x' }), 'models[0].source', /host ::1 is in a refused range/],
    ['an IPv4-mapped private address', doc({ source: 'http://[::ffff:10.0.0.1]/x' }), 'models[0].source', /private 10\.0\.0\.0\/8/],
    ['localhost', doc({ source: 'http://localhost:8080/x.gguf' }), 'models[0].source', /host localhost names the node itself/],
    ['a URL without a host', doc({ source: 'http:///x' }), 'models[0].source', /has no host/],
    ['a percent-encoded .. segment', doc({ source: 'file:///a/%2e%2e/etc/passwd' }), 'models[0].source', /\. or \.\. segments/],
    ['the attached short flag -m/etc/shadow', doc({}, { args: ['-m/etc/shadow'] }), 'models[0].profiles[1].args[0]', /-m is set by llmgw from source/],
    ['--model=/etc/shadow', doc({}, { args: ['--model=/etc/shadow'] }), 'models[0].profiles[1].args[0]', /--model is set by llmgw from source/],
    ['--model with underscores for dashes', doc({}, { args: ['--ctx_size', '9'] }), 'models[0].profiles[1].args[0]', /--ctx-size is set by llmgw/],
    ['an attached short value -c4096', doc({}, { args: ['--seed', '1', '-c4096'] }), 'models[0].profiles[1].args[2]', /-c is set by llmgw from contextLength/],
    ['an abbreviated long flag', doc({}, { engine: 'vllm', gpuClass: 'L4', args: ['--serv', 'other'] }), 'models[0].profiles[1].args[0]', /--served-model-name is set by llmgw/],
    ['-tp with its value attached', doc({}, { engine: 'vllm', gpuClass: 'L4', args: ['-tp2'] }), 'models[0].profiles[1].args[0]', /-tp is set by llmgw/],
  ])('%s', (_what, d, path, message) => {
    const found = problems(d).filter((p) => p.path === path);
    expect(found, JSON.stringify(problems(d))).toHaveLength(1);
    expect(found[0].message).toMatch(message);
  });

  it('other flags that start like a reserved short one, and safe env names, pass', () => {
    expect(problems(doc({}, { args: ['-mg', '0', '-ctk', 'q8_0', '-cb', '--model-draft-x'], env: { HF_HOME: '/srv/hf', NCCL_DEBUG: 'INFO' } }))).toEqual([]);
  });
});
