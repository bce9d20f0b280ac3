// API keys from the store (where the catalog API writes them) reach a real router process through
// the controller's snapshot: the router then refuses requests without a key, lets a key use only
// the models its list names (and lists only those), refuses an expired key, and refuses a revoked
// one within 2 s of the revocation.
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { openStore, type Store } from '@llmgw/store';
import { inheritedTestEnv, runTsEntry, spawnProcess, sqliteBackend, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController } from './test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

const hash = (secret: string): string => createHash('sha256').update(secret).digest('hex');
const SEARCH = 'llmgw-search-secret-0123456789abcdef';
const SHORT = 'llmgw-short-lived-secret-0123456789';

describe('keys the controller manages, at a real router', () => {
  it('are required, scope models, expire and are revoked on every request within 2 s', async () => {
    const db = await sqliteBackend.create();
    const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }, { name: 'qwen', replicas: 1 }]));
    cleanups.push(() => db.drop(), () => file.cleanup());
    const routerToken = 'router-keys-token-0123456789';
    const controller = await startController({ LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_SETTLE: '500ms', LLMGW_CONTROLLER_ROUTER_TOKEN: routerToken });
    cleanups.push(() => controller.close());
    const agents = [new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc], engines: 'sim' }), new FakeAgent({ nodeId: 'node-2', controllers: [controller.grpc], engines: 'sim' })];
    cleanups.push(() => Promise.all(agents.map((a) => a.stop())));
    for (const a of agents) a.connect();
    const env = inheritedTestEnv();
    const router = await spawnProcess({
      ...runTsEntry('apps/router/src/main.ts'),
      name: 'llmgw-router',
      cleanEnv: true,
      env: { ...env, LLMGW_ROUTER_PORT: '0', LLMGW_ROUTER_CONTROLLER: controller.grpc, LLMGW_ROUTER_CONTROLLER_TOKEN: routerToken, LLMGW_ROUTER_KEY_METRICS: 'true' },
      readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
      deadlineMs: 60_000,
    });
    cleanups.push(() => router.stop());
    const base = router.readyMatch?.[1] as string;
    const chat = (model: string, key?: string) =>
      fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key !== undefined ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
      });
    await waitFor(async () => (await chat('llama')).status === 200 && (await chat('qwen')).status === 200, { deadlineMs: 60_000, message: 'both models served, no key needed yet' });

    const store: Store = await openStore(db.url, { migrate: false });
    cleanups.push(() => store.close());
    await store.apiKeys.create('search', { owner: 'team-search', models: ['llama'], limits: {} }, hash(SEARCH));
    await store.apiKeys.create('short', { owner: 'ops', models: ['*'], limits: {}, expiresAt: Date.now() + 4_000 }, hash(SHORT));
    await waitFor(async () => (await chat('llama')).status === 401, { deadlineMs: 10_000, message: 'the router checks keys once the controller manages them' });

    expect((await chat('llama', SEARCH)).status).toBe(200);
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: SEARCH, maxRetries: 0 });
    const other = await client.chat.completions.create({ model: 'qwen', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(other).toBeInstanceOf(OpenAI.NotFoundError);
    expect((other as Error).message).toContain('The model `qwen` does not exist.');
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['llama']);
    const unknown = await new OpenAI({ baseURL: `${base}/v1`, apiKey: 'llmgw-nobody-0123456789abcdef', maxRetries: 0 }).models.list().catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.AuthenticationError);

    expect((await chat('qwen', SHORT)).status).toBe(200);
    await waitFor(async () => (await chat('qwen', SHORT)).status === 401, { deadlineMs: 10_000, message: 'the short-lived key expires' });
    expect(await (await chat('qwen', SHORT)).json()).toMatchObject({ error: { message: 'The API key has expired.' } });

    // Per-key series, asked for here: requests by status and tokens by kind, for the key that made them.
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^llmgw_router_key_requests_total\{key="search",model="llama",status="200"\} [1-9]/m);
    expect(metrics).toMatch(/^llmgw_router_key_tokens_total\{key="search",model="llama",kind="completion"\} [1-9]/m);
    // The model the key may not use is not named in the key's series either.
    expect(metrics).toMatch(/^llmgw_router_key_requests_total\{key="search",model="",status="404"\} 1$/m);
    expect(metrics).not.toMatch(/^llmgw_router_key_\w+\{key="search",model="qwen"/m);

    const revokedAt = Date.now();
    await store.apiKeys.revoke('search');
    await waitFor(async () => (await chat('llama', SEARCH)).status === 401, { deadlineMs: 2_000, intervalMs: 20, message: 'the revoked key refused within 2 s' });
    process.stdout.write(`[keys] revoked key refused ${Date.now() - revokedAt} ms after the revocation\n`);
    expect(router.stdout + router.stderr).not.toContain(SEARCH);
  }, 150_000);
});
