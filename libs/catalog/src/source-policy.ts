// The rules a weights source and a profile's environment must follow, in one pure place: the
// catalog validator applies them when a catalog is written, the agent again before it fetches or
// starts anything (it takes no controller's word for them). No DNS here: the agent checks the
// addresses a host name resolves to itself, with `refusedAddressRange` below.

/** A weights source, parsed and normalised. */
export type WeightsSource =
  /** A file or directory already on the node, used in place: percent-decoded, absolute, no `.`/`..` segment. */
  | { readonly kind: 'file'; readonly path: string }
  /** One file at an http(s) URL; `host` is lower case, an IPv6 literal without brackets. */
  | { readonly kind: 'http'; readonly url: string; readonly scheme: 'http' | 'https'; readonly host: string }
  /** One file of a Hugging Face repository at a revision. */
  | { readonly kind: 'hf-file'; readonly repo: string; readonly file: string; readonly revision: string }
  /** Every file of a Hugging Face repository at a revision (a directory). */
  | { readonly kind: 'hf-repo'; readonly repo: string; readonly revision: string };

/** The accepted source forms, for error messages. */
export const SOURCE_FORMS = 'file:///absolute/path, http(s)://host/path or hf://org/repo[/file]@revision';

export type SourceParse = { readonly ok: true; readonly source: WeightsSource } | { readonly ok: false; readonly reason: string };

const HF_SEGMENT = '[A-Za-z0-9][A-Za-z0-9._-]*';
const HF_RE = new RegExp(`^hf://(${HF_SEGMENT}/${HF_SEGMENT})((?:/[A-Za-z0-9._+=-]+)*)@([A-Za-z0-9][A-Za-z0-9._/-]*)$`);

/**
 * Parses a catalog `source`. Refuses (with a reason that follows the quoted source): spaces and
 * control characters, a `file://` path that is not absolute or has a `.`/`..` segment once
 * percent-decoded, an http(s) URL without a host (`http:///x`), with credentials or backslashes,
 * and any other scheme. Where a host may be fetched from is not its business: the catalog adds
 * `hostProblem`, the agent its own address policy.
 */
export function parseWeightsSource(raw: string): SourceParse {
  const bad = (reason: string): SourceParse => ({ ok: false, reason });
  if (/[\s\0-\x1f\x7f]/.test(raw)) return bad('must not contain spaces or control characters');
  if (raw.startsWith('file://')) {
    const rest = raw.slice('file://'.length);
    if (!rest.startsWith('/') || rest === '/') return bad('must be file:// followed by an absolute path');
    if (/[?#]/.test(rest)) return bad('must not contain ? or # (a file:// path is not a URL with a query)');
    let path: string;
    try {
      path = decodeURIComponent(rest);
    } catch {
      return bad('has a malformed percent-escape');
    }
    if (/[\0-\x1f\x7f]/.test(path)) return bad('must not contain control characters, percent-encoded or not');
    if (hasDotSegment(path)) return bad('must not contain . or .. segments (percent-encoded ones included)');
    return { ok: true, source: { kind: 'file', path } };
  }
  if (raw.startsWith('http://') || raw.startsWith('https://')) {
    const authority = raw.slice(raw.indexOf('//') + 2).split(/[/?#]/, 1)[0];
    if (authority === '') return bad('has no host');
    if (raw.includes('\\')) return bad('must not contain backslashes');
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return bad('is not a valid URL');
    }
    if (url.username || url.password) return bad('must not carry credentials; give the agent a token instead');
    const host = bareHost(url.hostname);
    if (host === '') return bad('has no host');
    return { ok: true, source: { kind: 'http', url: url.href, scheme: url.protocol === 'https:' ? 'https' : 'http', host } };
  }
  if (raw.startsWith('hf://')) {
    const m = HF_RE.exec(raw);
    if (!m) return bad('must be hf://org/repo[/file]@revision');
    const [, repo, filePart, revision] = m;
    const file = filePart.replace(/^\//, '');
    if (hasDotSegment(file) || hasDotSegment(revision)) return bad('must not contain . or .. segments');
    return { ok: true, source: file === '' ? { kind: 'hf-repo', repo, revision } : { kind: 'hf-file', repo, file, revision } };
  }
  return bad(`is not a supported source: ${SOURCE_FORMS}`);
}

/**
 * Why a URL host may not be fetched from whatever it resolves to: a `localhost` name, or an IP
 * literal in a refused range. Undefined for any other name (its addresses are checked when
 * connecting) and for a public address. `host` as `URL.hostname` gives it, brackets allowed.
 */
export function hostProblem(host: string): string | undefined {
  const h = bareHost(host).replace(/\.$/, '').toLowerCase();
  if (LOCALHOST_NAMES.has(h) || h.endsWith('.localhost')) return 'names the node itself (localhost)';
  const range = refusedAddressRange(h);
  return range ? `is in a refused range (${range})` : undefined;
}

const LOCALHOST_NAMES = new Set(['localhost', 'localhost.localdomain', 'ip6-localhost', 'ip6-loopback']);

// ---- addresses --------------------------------------------------------------------------

/** An IP address as 4 (IPv4) or 16 (IPv6) bytes. */
export interface IpAddress {
  readonly bytes: readonly number[];
}

/** A network: an address and how many leading bits of it count. */
export interface IpNetwork {
  readonly address: IpAddress;
  readonly prefix: number;
  /** As written, for messages. */
  readonly text: string;
}

/** Parses a dotted-quad IPv4 or an IPv6 address (brackets and a `%zone` allowed); undefined for anything else. */
export function parseIp(text: string): IpAddress | undefined {
  const s = bareHost(text).replace(/%.*$/, '');
  const v4 = parseIpv4(s);
  if (v4) return { bytes: v4 };
  return s.includes(':') ? parseIpv6(s) : undefined;
}

/** Parses `address/prefix` (or a bare address: the one address); undefined when malformed. */
export function parseIpNetwork(text: string): IpNetwork | undefined {
  const [addr, prefixText, extra] = text.split('/');
  if (extra !== undefined) return undefined;
  const address = parseIp(addr);
  if (!address) return undefined;
  const bits = address.bytes.length * 8;
  if (prefixText === undefined) return { address, prefix: bits, text };
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > bits) return undefined;
  return { address, prefix: Number(prefixText), text };
}

/** True when `ip` is inside `net` (an IPv4-mapped IPv6 address counts as its IPv4 address). */
export function inNetwork(ip: IpAddress, net: IpNetwork): boolean {
  const a = unmapped(ip).bytes;
  const n = unmapped(net.address).bytes;
  const prefix = net.address.bytes.length === 16 && n.length === 4 ? net.prefix - 96 : net.prefix;
  if (a.length !== n.length || prefix < 0) return false;
  for (let bit = 0; bit < prefix; bit++) {
    const mask = 0x80 >> bit % 8;
    if ((a[bit >> 3] & mask) !== (n[bit >> 3] & mask)) return false;
  }
  return true;
}

const REFUSED_V4: readonly [string, string][] = [
  ['0.0.0.0/8', 'unspecified ("this network")'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'shared address space (carrier-grade NAT)'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local (cloud metadata lives here)'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'IETF protocol assignments'],
  ['192.0.2.0/24', 'documentation'],
  ['192.88.99.0/24', '6to4 relay anycast'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'benchmarking'],
  ['198.51.100.0/24', 'documentation'],
  ['203.0.113.0/24', 'documentation'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved (broadcast included)'],
];
const REFUSED_V6: readonly [string, string][] = [
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['64:ff9b:1::/48', 'local-use NAT64'],
  ['100::/64', 'discard-only'],
  ['2001::/23', 'IETF protocol assignments (Teredo included)'],
  ['2001:db8::/32', 'documentation'],
  ['fc00::/7', 'private (unique local)'],
  ['fec0::/10', 'site-local'],
  ['fe80::/10', 'link-local'],
  ['ff00::/8', 'multicast'],
];
const nets = (table: readonly [string, string][]): [IpNetwork, string][] => table.map(([cidr, label]) => [parseIpNetwork(cidr) as IpNetwork, label]);
const REFUSED_V4_NETS = nets(REFUSED_V4);
const REFUSED_V6_NETS = nets(REFUSED_V6);
/** IPv6 forms that carry an IPv4 address, and where: IPv4-mapped, IPv4-compatible, NAT64, 6to4. */
const EMBEDDING_V4: readonly [IpNetwork, number][] = [
  [parseIpNetwork('::ffff:0:0/96') as IpNetwork, 12],
  [parseIpNetwork('::/96') as IpNetwork, 12],
  [parseIpNetwork('64:ff9b::/96') as IpNetwork, 12],
  [parseIpNetwork('2002::/16') as IpNetwork, 2],
];

/**
 * The refused range an address is in, as `<label> <cidr>` (e.g. `link-local 169.254.0.0/16`):
 * loopback, link-local, private, unspecified, multicast, documentation, CGNAT and the other
 * special-purpose ranges, IPv6 forms embedding such an IPv4 address included. Undefined for a
 * public address and for text that is not an IP address.
 */
export function refusedAddressRange(text: string): string | undefined {
  const ip = parseIp(text);
  return ip ? refusedRangeOf(ip) : undefined;
}

function refusedRangeOf(ip: IpAddress): string | undefined {
  if (ip.bytes.length === 16) {
    for (const [net, label] of REFUSED_V6_NETS) {
      if (inNetwork(ip, net)) return `${label} ${net.text}`;
    }
    for (const [net, at] of EMBEDDING_V4) {
      if (inNetwork(ip, net)) {
        const inner = refusedRangeOf({ bytes: ip.bytes.slice(at, at + 4) });
        return inner ? `${inner} (inside the IPv6 form ${net.text})` : undefined;
      }
    }
    return undefined;
  }
  for (const [net, label] of REFUSED_V4_NETS) {
    if (inNetwork(ip, net)) return `${label} ${net.text}`;
  }
  return undefined;
}

function unmapped(ip: IpAddress): IpAddress {
  const b = ip.bytes;
  if (b.length === 16 && b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) return { bytes: b.slice(12) };
  return ip;
}

function parseIpv4(s: string): number[] | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (!m) return undefined;
  const parts = m.slice(1).map(Number);
  return parts.every((p) => p <= 255) ? parts : undefined;
}

function parseIpv6(s: string): IpAddress | undefined {
  let text = s;
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    const v4 = parseIpv4(text.slice(lastColon + 1));
    if (!v4) return undefined;
    tail = v4;
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (h: string): number[] | undefined => {
    if (h === '') return [];
    const out: number[] = [];
    for (const g of h.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = groups(halves[0]);
  const rest = halves.length === 2 ? groups(halves[1]) : [];
  if (!head || !rest) return undefined;
  const missing = 8 - head.length - rest.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const all = [...head, ...new Array<number>(missing).fill(0), ...rest];
  const bytes = all.flatMap((g) => [g >> 8, g & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return { bytes };
}

function bareHost(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function hasDotSegment(path: string): boolean {
  return path.split('/').some((s) => s === '.' || s === '..');
}

// ---- profile environment ----------------------------------------------------------------

/**
 * Variables a catalog profile may never set for an engine (`*` ends a prefix), compared without
 * regard to case: each makes the dynamic loader, an interpreter, a shell or a library load code
 * or configuration from a path the catalog names, or moves where trust comes from (PATH, HOME,
 * CA bundles, proxies).
 */
export const PROFILE_ENV_DENY: readonly string[] = Object.freeze([
  // dynamic loader and libc
  'LD_*',
  'DYLD_*',
  'GLIBC_TUNABLES',
  'GCONV_PATH',
  'GETCONF_DIR',
  'HOSTALIASES',
  'LOCALDOMAIN',
  'RES_OPTIONS',
  'RESOLV_HOST_CONF',
  'LOCPATH',
  'NLSPATH',
  'MALLOC_*',
  'TZDIR',
  // where programs and per-user code are found
  'PATH',
  'HOME',
  'XDG_CONFIG_HOME',
  'XDG_DATA_HOME',
  'TMPDIR',
  // interpreters
  'NODE_OPTIONS',
  'NODE_PATH',
  'NODE_EXTRA_CA_CERTS',
  'NODE_TLS_REJECT_UNAUTHORIZED',
  'PYTHONPATH',
  'PYTHONHOME',
  'PYTHONSTARTUP',
  'PYTHONUSERBASE',
  'PYTHONEXECUTABLE',
  'PYTHONBREAKPOINT',
  'PYTHONWARNINGS',
  'PYTHONINSPECT',
  'PYTHONPLATLIBDIR',
  'PYTHONPYCACHEPREFIX',
  'PERL5OPT',
  'PERL5LIB',
  'PERLLIB',
  'RUBYOPT',
  'RUBYLIB',
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
  'JDK_JAVA_OPTIONS',
  // shells
  'BASH_ENV',
  'ENV',
  'BASH_FUNC_*',
  'SHELLOPTS',
  'BASHOPTS',
  'PS4',
  'PROMPT_COMMAND',
  'IFS',
  'CDPATH',
  // TLS trust and proxies (what the engine downloads, and from whom)
  'OPENSSL_CONF',
  'OPENSSL_ENGINES',
  'OPENSSL_MODULES',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'REQUESTS_CA_BUNDLE',
  'CURL_CA_BUNDLE',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'ALL_PROXY',
  'NO_PROXY',
  // plugins engines load as shared libraries
  'NCCL_NET_PLUGIN',
  'NCCL_TUNER_PLUGIN',
  'NCCL_PROFILER_PLUGIN',
  // llmgw's own
  'LLMGW_*',
]);

const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** True when `name` is `pattern` or, for a pattern ending in `*`, starts with its prefix (case-insensitive). */
export function envNameMatches(name: string, pattern: string): boolean {
  const n = name.toUpperCase();
  const p = pattern.toUpperCase();
  return p.endsWith('*') ? n.startsWith(p.slice(0, -1)) : n === p;
}

/** Why a profile may not set the variable `name` (a malformed name, or one on {@link PROFILE_ENV_DENY}); undefined when it may. */
export function profileEnvProblem(name: string): string | undefined {
  if (!ENV_NAME_RE.test(name)) return 'is not a variable name ([A-Za-z_][A-Za-z0-9_]*)';
  const hit = PROFILE_ENV_DENY.find((p) => envNameMatches(name, p));
  return hit === undefined ? undefined : `may not be set by a catalog (${hit} is refused: it can make the engine run code or trust what the catalog names)`;
}
