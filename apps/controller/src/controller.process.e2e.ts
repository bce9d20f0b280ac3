// llmgw-controller as a real process: it prints its gRPC port (asked for port 0), seeds the store
// from the catalog file, places a replica on an agent that joins, serves the admin API to
// loopback clients without a token, and on SIGTERM exits 0 with its state in the store.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '@llmgw/store';
import { inheritedTestEnv, runTsEntry, spawnProcess, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, FAST_ENV, WatchingRouter } from './test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

describe('llmgw-controller process', () => {
  it(
    'prints its gRPC port, places a replica for a joining agent, and keeps its state across SIGTERM',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-controller-'));
      const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
      cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }), () => file.cleanup());
      const env = inheritedTestEnv();
      const proc = await spawnProcess({
        ...runTsEntry('apps/controller/src/main.ts'),
        name: 'llmgw-controller',
        cleanEnv: true,
        env: {
          ...env,
          ...FAST_ENV,
          LLMGW_DATA_DIR: dataDir,
          LLMGW_CONTROLLER_PORT: '0',
          LLMGW_CONTROLLER_GRPC_PORT: '0',
          LLMGW_CONTROLLER_CATALOG_FILE: file.path,
          LLMGW_CONTROLLER_SETTLE: '500ms',
          // No join or router token: allowed only when said explicitly, and warned about.
          LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true',
        },
        readyWhen: { stdoutMatch: /llmgw-controller listening on (http:\/\/127\.0\.0\.1:\d+)/ },
        deadlineMs: 60_000,
      });
      const http = proc.readyMatch?.[1] as string;
      const grpcPort = /llmgw-controller gRPC listening on 127\.0\.0\.1:(\d+)/.exec(proc.stdout)?.[1];
      expect(Number(grpcPort)).toBeGreaterThan(0);
      expect(proc.stdout).toContain('LLMGW_CONTROLLER_INSECURE_NO_AUTH: no join token');
      const grpc = `127.0.0.1:${grpcPort}`;

      const agent = new FakeAgent({ nodeId: 'node-1', controllers: [grpc] });
      cleanups.push(() => agent.stop());
      agent.connect();
      const router = new WatchingRouter(grpc);
      cleanups.push(() => router.close());
      await waitFor(() => router.latest?.endpoints.length === 1, { deadlineMs: 30_000, message: 'one endpoint' });

      // No admin token configured: loopback clients are served.
      const status = await fetch(`${http}/v1/admin/status`);
      expect(status.status).toBe(200);
      expect(JSON.parse(await status.text())).toMatchObject({ controller: { leader: true }, replicas: { total: 1, byState: { ready: 1 } } });
      await waitFor(async () => (await fetch(`${http}/readyz`)).status === 200, { deadlineMs: 5_000, message: 'ready' });

      expect(await proc.stop('SIGTERM', 15_000)).toEqual({ code: 0, signal: null });
      expect(proc.stderr).toBe('');
      const store = await openStore(`sqlite:${join(dataDir, 'llmgw.db')}`);
      try {
        expect((await store.catalog.current())?.author).toBe(`controller seed from ${file.path}`);
        const replicas = await store.replicas.list();
        expect(replicas.map((r) => [r.model, r.state, r.members[0].nodeId])).toEqual([['llama', 'ready', 'node-1']]);
        expect((await store.nodes.list()).map((n) => n.id)).toEqual(['node-1']);
      } finally {
        await store.close();
      }
    },
    120_000,
  );
});
