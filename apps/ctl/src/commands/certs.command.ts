import { join, resolve } from 'node:path';
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { parseHost } from '@llmgw/config';
import { generateCa, issueCertificate, pemPairFiles, readPemPair, writePemPair, type CertificateUsage } from '@llmgw/tls';
import { EXIT_FAILURE, EXIT_OK, UsageError, type CliCommand, type CliIo } from '../cli-io';

/** Where `llmgw certs` keeps the CA and what it issues unless `--dir` says otherwise (relative to the current directory). */
export const DEFAULT_CERTS_DIR = '.llmgw/tls';
/** The CA's pair name in the directory: `ca.crt`, `ca.key`. */
const CA = 'ca';

/** Hooks tests use: the clock certificates are dated by. */
export interface CertsDeps {
  now?: () => Date;
}

/**
 * `llmgw certs init [--dir DIR] [--days N] [--json]`: a new CA (`ca.crt`, `ca.key` 0600) in DIR
 * (default `./.llmgw/tls`, created 0700). Refuses, exit 1, when DIR already holds one.
 */
export function createCertsInitCommand(deps: CertsDeps = {}): CliCommand {
  return {
    path: ['certs', 'init'],
    summary: 'create a CA for gRPC TLS (ca.crt, ca.key) in DIR; never overwrites one',
    usage: 'llmgw certs init [--dir DIR] [--days N] [--json]',
    async run(argv: string[], io: CliIo): Promise<number> {
      const { values } = parseArgs({
        args: argv,
        options: { dir: { type: 'string' }, days: { type: 'string' }, json: { type: 'boolean', default: false } },
        strict: true,
        allowPositionals: false,
      });
      const dir = resolve(io.cwd, values.dir ?? DEFAULT_CERTS_DIR);
      const days = parseDays(values.days);
      const existing = pemPairFiles(dir, CA);
      const ca = await generateCa({ now: (deps.now ?? (() => new Date()))(), ...(days !== undefined && { validDays: days }) });
      let files: { certFile: string; keyFile: string };
      try {
        files = writePemPair(dir, CA, ca);
      } catch (error) {
        io.err(`llmgw: ${(error as Error).message} (${existing.certFile} and ${existing.keyFile} are the CA already; remove both to start over)\n`);
        return EXIT_FAILURE;
      }
      if (values.json) io.out(JSON.stringify({ ca: files }, null, 2) + '\n');
      else {
        io.out(
          `CA written: ${files.certFile}, ${files.keyFile} (0600; keep it offline if you can: only \`llmgw certs issue\` needs it)\n` +
            `next: llmgw certs issue controller --dir ${dir} --host <controller host> --ip <controller IP>\n`,
        );
      }
      return EXIT_OK;
    },
  };
}

/**
 * `llmgw certs issue NAME [--dir DIR] [--host H]... [--ip IP]... [--client | --server | --both]
 * [--days N] [--force] [--json]`: `NAME.crt`/`NAME.key` (0600) in DIR, signed by DIR's CA, with
 * CN = NAME. A server certificate (the default) carries the --host and --ip names clients dial;
 * a client certificate (mTLS) carries NAME as a DNS name too, and NAME must be the node id or
 * router id that uses it. Refuses to replace an existing NAME unless --force.
 */
export function createCertsIssueCommand(deps: CertsDeps = {}): CliCommand {
  return {
    path: ['certs', 'issue'],
    summary: "issue NAME.crt/NAME.key signed by DIR's CA: a server certificate (--host, --ip) or a client one (--client, CN = node or router id)",
    usage: 'llmgw certs issue NAME [--dir DIR] [--host H]... [--ip IP]... [--client | --server | --both] [--days N] [--force] [--json]',
    async run(argv: string[], io: CliIo): Promise<number> {
      const { values, positionals } = parseArgs({
        args: argv,
        options: {
          dir: { type: 'string' },
          host: { type: 'string', multiple: true },
          ip: { type: 'string', multiple: true },
          client: { type: 'boolean', default: false },
          server: { type: 'boolean', default: false },
          both: { type: 'boolean', default: false },
          days: { type: 'string' },
          force: { type: 'boolean', default: false },
          json: { type: 'boolean', default: false },
        },
        strict: true,
        allowPositionals: true,
      });
      if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'missing NAME' : `unexpected argument '${positionals[1]}'`);
      const name = positionals[0];
      if (name === CA) throw new UsageError(`NAME must not be "${CA}": that is the CA itself`);
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(name)) throw new UsageError('NAME must be letters, digits, ".", "_" or "-" (a node id, a router id, or a name such as controller)');
      const usage = usageOf(values);
      const hosts = values.host ?? [];
      const ips = values.ip ?? [];
      for (const host of hosts) {
        if (isIP(host) !== 0) throw new UsageError(`--host ${host} is an IP address: use --ip`);
        if (!parseHost(host).ok) throw new UsageError(`--host ${JSON.stringify(host)} is not a host name`);
      }
      for (const ip of ips) if (isIP(ip) === 0) throw new UsageError(`--ip ${JSON.stringify(ip)} is not an IP address`);
      if (usage !== 'client' && hosts.length === 0 && ips.length === 0) {
        throw new UsageError('a server certificate needs --host and/or --ip: the names clients dial (or pass --client)');
      }
      const days = parseDays(values.days);
      const dir = resolve(io.cwd, values.dir ?? DEFAULT_CERTS_DIR);

      let ca;
      try {
        ca = readPemPair(dir, CA);
      } catch (error) {
        io.err(`llmgw: no CA in ${dir}: ${(error as Error).message}; run \`llmgw certs init --dir ${dir}\` first\n`);
        return EXIT_FAILURE;
      }
      const now = (deps.now ?? (() => new Date()))();
      let files: { certFile: string; keyFile: string };
      try {
        const pair = await issueCertificate(ca, { commonName: name, dnsNames: hosts, ipAddresses: ips, usage, now, ...(days !== undefined && { validDays: days }) });
        files = writePemPair(dir, name, pair, { overwrite: values.force });
      } catch (error) {
        io.err(`llmgw: ${(error as Error).message}${/exists; refusing/.test((error as Error).message) ? ' (pass --force to replace it)' : ''}\n`);
        return EXIT_FAILURE;
      }
      const caFile = join(dir, `${CA}.crt`);
      if (values.json) io.out(JSON.stringify({ name, usage, ...files, caFile }, null, 2) + '\n');
      else {
        const settings =
          usage === 'client'
            ? `on ${name}: LLMGW_GRPC_TLS_CA=${caFile} LLMGW_GRPC_TLS_CERT=${files.certFile} LLMGW_GRPC_TLS_KEY=${files.keyFile}`
            : `on the controller: LLMGW_GRPC_TLS_CERT=${files.certFile} LLMGW_GRPC_TLS_KEY=${files.keyFile}; on agents and routers: LLMGW_GRPC_TLS_CA=${caFile}`;
        io.out(`${usage} certificate for ${name} written: ${files.certFile}, ${files.keyFile} (0600)\n${settings}\n`);
      }
      return EXIT_OK;
    },
  };
}

/** `llmgw certs init` and `llmgw certs issue`. */
export const CERTS_COMMANDS: readonly CliCommand[] = [createCertsInitCommand(), createCertsIssueCommand()];

function usageOf(values: { client?: boolean; server?: boolean; both?: boolean }): CertificateUsage {
  const chosen = (['client', 'server', 'both'] as const).filter((u) => values[u] === true);
  if (chosen.length > 1) throw new UsageError('pass at most one of --client, --server, --both');
  return chosen[0] ?? 'server';
}

function parseDays(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d{1,5}$/.test(raw) || Number(raw) < 1) throw new UsageError(`--days must be a whole number of days from 1 (got ${JSON.stringify(raw)})`);
  return Number(raw);
}
