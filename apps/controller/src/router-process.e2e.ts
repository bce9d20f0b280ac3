// The controller with a real llmgw-router process: the router follows RouterService.Watch to
// the replicas the controller placed (asking for, and applying, compressed snapshots), answers an
// OpenAI request through one of them, refuses one for an endpoint the catalog says the model does
// not serve, and its usage reports make that replica's idleness known to the controller. The
// controller requires a router token, which the router sends on both calls.
import OpenAI from 'openai';
import { inheritedTestEnv, runTsEntry, spawnProcess, sqliteBackend, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController } from './test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

describe('with a real router process', () => {
  it(
    'the router serves a request through a replica the controller placed, and reports its use back',
    async () => {
      const db = await sqliteBackend.create();
      const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
      cleanups.push(() => db.drop(), () => file.cleanup());
      const routerToken = 'router-process-token-0123456789';
      const controller = await startController({
        LLMGW_DATABASE_URL: db.url,
        LLMGW_CONTROLLER_CATALOG_FILE: file.path,
        LLMGW_CONTROLLER_SETTLE: '500ms',
        LLMGW_CONTROLLER_ROUTER_TOKEN: routerToken,
      });
      cleanups.push(() => controller.close());
      const agent = new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc], engines: 'sim' });
      cleanups.push(() => agent.stop());
      agent.connect();

      const env = inheritedTestEnv();
      const router = await spawnProcess({
        ...runTsEntry('apps/router/src/main.ts'),
        name: 'llmgw-router',
        cleanEnv: true,
        env: { ...env, LLMGW_ROUTER_PORT: '0', LLMGW_ROUTER_CONTROLLER: controller.grpc, LLMGW_ROUTER_CONTROLLER_TOKEN: routerToken, LLMGW_ROUTER_USAGE_INTERVAL: '200ms' },
        readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
        deadlineMs: 60_000,
      });
      cleanups.push(() => router.stop());
      const base = router.readyMatch?.[1] as string;
      const replica = await waitFor(() => [...controller.plane.replicas.values()].find((r) => r.replica.state === 'ready'), { deadlineMs: 60_000, message: 'a ready replica' });
      expect(replica.replica.lastUsedAt).toBeUndefined();

      const res = await waitFor(
        async () => {
          const r = await fetch(`${base}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
          });
          return r.status === 200 ? r : undefined;
        },
        { deadlineMs: 20_000, message: 'the router answers through the replica' },
      );
      const body = JSON.parse(await res.text()) as { model: string; choices: unknown[] };
      expect(body.model).toBe('llama');
      expect(body.choices.length).toBeGreaterThan(0);
      // The snapshots that got it there went compressed: the router asked, so its stream carries only `compressed`.
      const watching = controller.logs.filter((l) => l.msg === 'router watching');
      expect(watching.length).toBeGreaterThan(0);
      expect(watching.every((l) => l.compressed === true)).toBe(true);
      // A vLLM profile without pooling flags serves chat and completions only: the catalog view
      // says so, and the router refuses embeddings itself.
      const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
      const refused = await client.embeddings.create({ model: 'llama', input: 'hello' }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
      expect(refused).toMatchObject({ status: 400, code: 'unsupported_endpoint', param: 'model' });
      expect((refused as Error).message).toContain('The model `llama` does not serve /v1/embeddings (it serves /v1/chat/completions, /v1/completions)');
      const used = await waitFor(() => controller.plane.replicas.get(replica.replica.id)?.replica.lastUsedAt, { deadlineMs: 10_000, message: 'usage reported' });
      expect(used).toBeGreaterThan(Date.now() - 60_000);
      expect(controller.logs.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('router') && l.msg.includes('refused'))).toEqual([]);
    },
    120_000,
  );
});
