// `llmgw gc` end to end against a real controller and a real agent process: the listing names
// only cache-named entries no catalog model wants, with their sizes; `gc --collect` removes them
// from disk; an entry a model wants and whatever an operator copied into the cache directory
// (a file, a directory) are never listed and never removed.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cacheName } from '@llmgw/catalog';
import { repoRoot, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_ENV, baseEnv, describeCluster, TestCluster } from './cluster.harness';

const TOKEN = 'e2e-gc-token-0123456789';
const OLD = cacheName('https://example.invalid/old.gguf') as string;
const WANTED_SOURCE = 'https://example.invalid/wanted.gguf';
const WANTED = cacheName(WANTED_SOURCE) as string;
const OLD_BYTES = 48 * 1024;

const cluster = new TestCluster();
const cacheDir = join(cluster.dataDir, 'gpu-a', 'cache');
let controllerUrl: string;

/** Runs `node tools/bin/llmgw.cjs ARGS` as a process; exit code and both streams. */
function llmgw(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(repoRoot(), 'tools', 'bin', 'llmgw.cjs'), ...args, '--controller', controllerUrl, '--token', TOKEN], {
      cwd: cluster.dataDir,
      env: baseEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

interface GcPlan {
  catalogRevision: number;
  totalBytes: number;
  nodes: { nodeId: string; connected: boolean; totalBytes: number; entries: { name: string; sizeBytes: number }[] }[];
}

beforeAll(async () => {
  // The cache as the agent finds it at start: one entry llmgw fetched for a model since removed,
  // one a catalog model still wants, and what an operator copied in by hand.
  mkdirSync(join(cacheDir, 'operator-models'), { recursive: true });
  writeFileSync(join(cacheDir, OLD), Buffer.alloc(OLD_BYTES, 7));
  writeFileSync(join(cacheDir, WANTED), Buffer.alloc(8 * 1024, 3));
  writeFileSync(join(cacheDir, 'my-model.gguf'), Buffer.alloc(16 * 1024, 5));
  writeFileSync(join(cacheDir, 'operator-models', 'weights.bin'), Buffer.alloc(4 * 1024, 9));

  // The wanted model wants no replica: nothing starts, nothing downloads, its cache entry stays wanted.
  const catalogFile = cluster.writeFile(
    'catalog.yaml',
    ['models:', '  - name: wanted-model', `    source: ${WANTED_SOURCE}`, '    size: 8KB', '    replicas: 0', '    profiles: [{engine: llamacpp}]', ''].join('\n'),
  );
  const controller = await cluster.startController({ LLMGW_CONTROLLER_CATALOG_FILE: catalogFile, LLMGW_CONTROLLER_SETTLE: '1s', LLMGW_CONTROLLER_TICK: '250ms' });
  controllerUrl = controller.url;
  await cluster.startAgent('gpu-a', { [AGENT_ENV.fakeGpus]: '8xH100-80GB', [AGENT_ENV.engineOverride]: 'sim', [AGENT_ENV.cacheDir]: cacheDir });
  try {
    // The controller knows the node and its cache listing, and has the catalog in force.
    await waitFor(
      async () => {
        const node = (await cluster.nodes()).find((n) => n.connected) as { cache?: { entries?: number } } | undefined;
        const status = await cluster.admin<{ controller: { catalogRevision?: number; phase: string } }>('status');
        return node?.cache?.entries === 4 && status.controller.catalogRevision === 1 && status.controller.phase === 'active';
      },
      { deadlineMs: 30_000, intervalMs: 100, message: 'the agent registered with its 4 cache entries and catalog revision 1 in force' },
    );
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${describeCluster(cluster)}`);
  }
}, 120_000);

afterAll(async () => {
  const left = await cluster.stop(5_000);
  await stopAllSpawned();
  expect(left.map((p) => `${p.pid} ${p.comm}`), 'no process left running').toEqual([]);
}, 60_000);

function expectOperatorAndWantedFilesKept(): void {
  expect(existsSync(join(cacheDir, WANTED)), 'the wanted entry').toBe(true);
  expect(statSync(join(cacheDir, 'my-model.gguf')).size, "the operator's file").toBe(16 * 1024);
  expect(statSync(join(cacheDir, 'operator-models', 'weights.bin')).size, "the operator's directory").toBe(4 * 1024);
}

describe('llmgw gc against a controller and an agent', () => {
  let nodeId: string;

  it('lists only the cache-named entry no model wants, with its size', async () => {
    const listed = await llmgw(['gc', '--json']);
    expect(listed.code, listed.err).toBe(0);
    const plan = JSON.parse(listed.out) as GcPlan;
    expect(plan.catalogRevision).toBe(1);
    expect(plan.nodes).toHaveLength(1);
    nodeId = plan.nodes[0].nodeId;
    expect(plan.nodes[0].entries).toEqual([expect.objectContaining({ name: OLD, sizeBytes: OLD_BYTES })]);
    expect(plan.totalBytes).toBe(OLD_BYTES);

    const text = await llmgw(['gc']);
    expect(text.code, text.err).toBe(0);
    expect(text.out).toContain(OLD);
    expect(text.out).toContain('1 entry');
    for (const kept of [WANTED, 'my-model.gguf', 'operator-models']) expect(text.out).not.toContain(kept);
    expectOperatorAndWantedFilesKept();
  }, 60_000);

  it('--collect on a node that does not exist, or without saying where, removes nothing anywhere', async () => {
    const unknown = await llmgw(['gc', '--collect', '--node', 'no-such-node']);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain("node 'no-such-node' is not known; nothing was collected");
    const unscoped = await llmgw(['gc', '--collect']);
    expect(unscoped.code).toBe(2);
    expect(unscoped.err).toContain('--collect needs --node ID (repeatable) or --all');
    // What a plain fetch() sends: text/plain, whose body the controller never reads.
    const plain = await fetch(`${controllerUrl}/v1/admin/gc/collect`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ nodes: ['no-such-node'] }) });
    expect(plain.status).toBe(415);
    expect(plain.headers.get('content-type')).toBe('application/problem+json');
    expect(existsSync(join(cacheDir, OLD)), 'the unwanted entry is still there').toBe(true);
    expectOperatorAndWantedFilesKept();
  }, 60_000);

  it('--collect --node removes it from disk and leaves the wanted entry and the operator files alone', async () => {
    const collected = await llmgw(['gc', '--collect', '--node', nodeId]);
    expect(collected.code, collected.err).toBe(0);
    expect(collected.out).toMatch(/^asked to remove 1 entry \(.+\) on 1 node\n/);
    expect(collected.out).toContain(`${nodeId}: removed ${OLD}`);
    expect(existsSync(join(cacheDir, OLD)), 'the unwanted entry is gone').toBe(false);
    expectOperatorAndWantedFilesKept();

    // Once the agent has reported its new listing, there is nothing left to collect.
    const after = await waitFor(
      async () => {
        const r = await llmgw(['gc', '--json']);
        const plan = JSON.parse(r.out) as GcPlan;
        return r.code === 0 && plan.nodes.length === 0 ? plan : undefined;
      },
      { deadlineMs: 20_000, intervalMs: 250, message: 'gc listing nothing after the collect' },
    );
    expect(after.totalBytes).toBe(0);
    expectOperatorAndWantedFilesKept();
  }, 60_000);
});
