import { realpath } from 'node:fs/promises';
import { sep } from 'node:path';
import { envNameMatches, inNetwork, parseIp, profileEnvProblem, refusedAddressRange, type IpNetwork, type WeightsSource } from '@llmgw/catalog';
import { parseWeightsSource } from './weights-source.parser';

/** Source schemes an agent can be told to accept (`file://` is governed by `dirs`). */
export const SOURCE_SCHEMES = ['https', 'http', 'hf'] as const;
export type SourceScheme = (typeof SOURCE_SCHEMES)[number];

/**
 * What this node agrees to fetch, load and pass to engines, whatever the controller sends. Set
 * by the node's operator (agent configuration), never by the catalog.
 */
export interface SourcePolicySettings {
  /** Schemes of catalog sources this agent fetches (`hf` = from HF_ENDPOINT). */
  readonly schemes: readonly SourceScheme[];
  /** When set, the only hosts http(s) sources may name: exact names or `*.suffix`. Unset = any host. */
  readonly hosts?: readonly string[];
  /** Networks in otherwise refused ranges (loopback, private, link-local, ...) that may be connected to. */
  readonly allowNets: readonly IpNetwork[];
  /** Directories `file://` sources (and a controller's `localPath`) must lie under, symbolic links resolved. Empty = no `file://`. */
  readonly dirs: readonly string[];
  /** When set, the only variables a profile's `env` may set (names or prefixes ending in `*`), on top of the deny-list. */
  readonly envAllow?: readonly string[];
}

/** A request the policy refuses; the message says what was refused and which setting decides it. */
export class SourceRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SourceRefusedError';
  }
}

/**
 * The agent's side of the trust boundary: catalog sources, the addresses they lead to and a
 * profile's environment are checked here before anything is fetched or started. The source
 * syntax and the environment deny-list are the catalog's own rules (`@llmgw/catalog`); schemes,
 * hosts, networks and directories are this node's settings.
 */
export class SourcePolicy {
  constructor(private readonly settings: SourcePolicySettings) {}

  /**
   * Checks a catalog source before anything is fetched: its syntax, scheme, host name and (for
   * an IP literal) address; a `file://` path must exist and, symbolic links resolved, lie under
   * one of the configured directories; the result carries the resolved path. Host names are
   * resolved when connecting (see `addressProblem`), never here.
   */
  async admitSource(raw: string): Promise<WeightsSource> {
    let source: WeightsSource;
    try {
      source = parseWeightsSource(raw);
    } catch (error) {
      throw new SourceRefusedError((error as Error).message);
    }
    const refuse = (why: string): never => {
      throw new SourceRefusedError(`weights source ${JSON.stringify(raw)} is refused by this node's source policy: ${why}`);
    };
    if (source.kind === 'file') return { kind: 'file', path: await this.admitPath(source.path, refuse) };
    const scheme: SourceScheme = source.kind === 'http' ? source.scheme : 'hf';
    if (!this.settings.schemes.includes(scheme)) {
      refuse(`${scheme} sources are not accepted (LLMGW_AGENT_SOURCE_SCHEMES is ${this.settings.schemes.join(',') || 'empty'})`);
    }
    if (source.kind === 'http') {
      const hosts = this.settings.hosts;
      if (hosts !== undefined && !hosts.some((h) => hostMatches(source.host, h))) {
        refuse(`host ${source.host} is not in LLMGW_AGENT_SOURCE_HOSTS (${hosts.join(',')})`);
      }
      const problem = this.addressProblem(source.host);
      if (problem !== undefined) refuse(`${source.host} ${problem}`);
    }
    return source;
  }

  /** Checks a path the controller names for weights (StartReplica `localPath`): under a configured directory or `cacheDir`. */
  async admitLocalPath(path: string, cacheDir: string): Promise<string> {
    return this.admitPath(path, (why) => {
      throw new SourceRefusedError(`localPath ${JSON.stringify(path)} is refused by this node's source policy: ${why}`);
    }, [cacheDir]);
  }

  /**
   * Why this agent may not connect to `address` (an IP literal): it is in a refused range and
   * no LLMGW_AGENT_SOURCE_ALLOW_NETS network holds it. Undefined when it may, and for text that
   * is not an IP address (a host name: its addresses are checked once resolved).
   */
  addressProblem(address: string): string | undefined {
    const ip = parseIp(address);
    if (!ip) return undefined;
    const range = refusedAddressRange(address);
    if (range === undefined || this.settings.allowNets.some((net) => inNetwork(ip, net))) return undefined;
    return `is in a refused range (${range}); list its network in LLMGW_AGENT_SOURCE_ALLOW_NETS to allow it`;
  }

  /** Every variable of a profile's `env` this node refuses, as `NAME: why`. */
  envProblems(env: Readonly<Record<string, string>>): string[] {
    const problems: string[] = [];
    const allow = this.settings.envAllow;
    for (const name of Object.keys(env)) {
      const denied = profileEnvProblem(name);
      if (denied !== undefined) problems.push(`env ${name} ${denied}`);
      else if (allow !== undefined && !allow.some((p) => envNameMatches(name, p))) {
        problems.push(`env ${name} is not in LLMGW_AGENT_PROFILE_ENV_ALLOW (${allow.join(',')})`);
      }
    }
    return problems;
  }

  private async admitPath(path: string, refuse: (why: string) => never, extraDirs: readonly string[] = []): Promise<string> {
    const dirs = [...this.settings.dirs, ...extraDirs];
    if (dirs.length === 0) refuse('file:// sources are not accepted (LLMGW_AGENT_SOURCE_DIRS is not set)');
    const real = await realpath(path).catch((error: NodeJS.ErrnoException) =>
      refuse(error.code === 'ENOENT' ? `${path} does not exist on this node` : `${path} cannot be resolved (${error.code ?? error.message})`),
    );
    for (const dir of dirs) {
      const root = await realpath(dir).catch(() => undefined);
      if (root !== undefined && (real === root || real.startsWith(root.endsWith(sep) ? root : `${root}${sep}`))) return real;
    }
    const shown = real === path ? path : `${path} (${real} once links are resolved)`;
    return refuse(`${shown} is not under LLMGW_AGENT_SOURCE_DIRS (${this.settings.dirs.join(',') || 'none'})`);
  }
}

/** `host` is `pattern`, or a subdomain of it when the pattern is `*.suffix` (case-insensitive). */
function hostMatches(host: string, pattern: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  const p = pattern.toLowerCase();
  return p.startsWith('*.') ? h.endsWith(p.slice(1)) : h === p;
}
