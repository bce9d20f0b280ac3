// The controller with real llmgw-agent processes (fake GPUs, the engine simulator in place of
// vLLM): placement onto real engines, kill -9 of an agent and its engines with the replicas
// rebuilt on the survivor, a model removed from the catalog stopping its engines, and a catalog
// naming files outside the agent's source directories refused by the agent, never started.
import { mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '@llmgw/store';
import { processExists, sqliteBackend, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { hashNodeSecret } from './nodes/node-credential.service';
import { startAgent } from './test/agent-process.harness';
import { catalogFile, startController, WatchingRouter } from './test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
const enginePids = new Set<number>();
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
  // Engines deliberately outlive their agent: end any a failed assertion left behind, by id.
  for (const pid of enginePids) if (processExists(pid)) process.kill(-pid, 'SIGKILL');
});

describe('with real agent processes', () => {
  it(
    'places onto real engines, rebuilds on the survivor after kill -9 of an agent and its engines, and stops engines of a removed model',
    async () => {
      const root = mkdtempSync(join(tmpdir(), 'llmgw-ctl-agents-'));
      cleanups.push(() => rmSync(root, { recursive: true, force: true }));
      const weights = join(root, 'tiny.gguf');
      writeFileSync(weights, 'not really weights: the simulator does not read them');
      const doc = { models: [{ name: 'tiny', source: `file://${weights}`, size: '1MB', replicas: 2, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB' }] }] };
      const db = await sqliteBackend.create();
      const file = catalogFile(doc);
      cleanups.push(() => db.drop(), () => file.cleanup());
      const controller = await startController({
        LLMGW_DATABASE_URL: db.url,
        LLMGW_CONTROLLER_CATALOG_FILE: file.path,
        LLMGW_CONTROLLER_SETTLE: '1s',
        // The real agent heartbeats at the interval Welcome names; windows for a test.
        LLMGW_CONTROLLER_HEARTBEAT_INTERVAL: '300ms',
        LLMGW_CONTROLLER_UNREACHABLE_AFTER: '1500ms',
        LLMGW_CONTROLLER_LOST_AFTER: '3s',
      });
      cleanups.push(() => controller.close());
      const router = new WatchingRouter(controller.grpc);
      cleanups.push(() => router.close());
      const agents = await Promise.all(['node-a', 'node-b'].map((id) => startAgent(id, controller.grpc, root)));
      cleanups.push(() => Promise.all(agents.map((a) => a.stop())));

      // 1. Both replicas placed on real (simulated) engines, ready and published.
      const placed = await waitFor(() => (router.latest?.endpoints.length === 2 ? router.latest : undefined), { deadlineMs: 90_000, message: 'two endpoints' });
      for (const e of placed.endpoints) expect((await fetch(`${e.url}/health`)).status).toBe(200);
      const models = await (await fetch(`${placed.endpoints[0].url}/v1/models`)).text();
      expect(models).toContain('tiny');
      for (const n of controller.plane.nodes.snapshot().values()) for (const r of n.reported.values()) if (r.pid !== undefined) enginePids.add(r.pid);

      // 2. kill -9 of the agent holding the replicas, and of its engines.
      const victimId = placed.endpoints[0].nodeId;
      const victim = agents[victimId === 'node-a' ? 0 : 1];
      const victimEngines = [...(controller.plane.nodes.get(victimId)?.reported.values() ?? [])].map((r) => r.pid).filter((p): p is number => p !== undefined);
      expect(victimEngines.length).toBeGreaterThan(0);
      await victim.kill9();
      for (const pid of victimEngines) process.kill(-pid, 'SIGKILL');
      await waitFor(() => controller.plane.nodes.get(victimId)?.info.state === 'lost', { deadlineMs: 15_000, message: 'node lost' });
      const rebuilt = await waitFor(
        () => {
          const s = router.latest;
          return s && s.endpoints.length === 2 && s.endpoints.every((e) => e.nodeId !== victimId) ? s : undefined;
        },
        { deadlineMs: 90_000, message: 'rebuilt on the survivor' },
      );
      for (const e of rebuilt.endpoints) expect((await fetch(`${e.url}/health`)).status).toBe(200);
      const survivorId = rebuilt.endpoints[0].nodeId;
      const survivorEngines = () => [...(controller.plane.nodes.get(survivorId)?.reported.values() ?? [])];
      for (const r of survivorEngines()) if (r.pid !== undefined) enginePids.add(r.pid);

      // 3. The model leaves the catalog: its engines stop, its endpoints go.
      const store = await openStore(db.url);
      cleanups.push(() => store.close());
      await store.catalog.put({ models: [] }, 'test');
      await waitFor(() => router.latest?.endpoints.length === 0 && controller.plane.replicas.size === 0, { deadlineMs: 30_000, message: 'withdrawn and forgotten' });
      await waitFor(() => survivorEngines().length === 0, { deadlineMs: 30_000, message: 'the agent runs nothing' });
      for (const e of rebuilt.endpoints) await expect(fetch(`${e.url}/health`)).rejects.toThrow();
    },
    240_000,
  );

  it(
    'a real agent keeps the node secret it was issued (0600) and rejoins with it after a restart; another machine claiming its id is refused and stops',
    async () => {
      const root = mkdtempSync(join(tmpdir(), 'llmgw-ctl-identity-'));
      cleanups.push(() => rmSync(root, { recursive: true, force: true }));
      const db = await sqliteBackend.create();
      const file = catalogFile({ models: [] });
      cleanups.push(() => db.drop(), () => file.cleanup());
      const joinToken = 'agent-identity-join-token-0123';
      const controller = await startController({
        LLMGW_DATABASE_URL: db.url,
        LLMGW_CONTROLLER_CATALOG_FILE: file.path,
        LLMGW_CONTROLLER_JOIN_TOKEN: joinToken,
        LLMGW_CONTROLLER_ROUTER_TOKEN: 'agent-identity-router-token-0123',
        LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'false',
      });
      cleanups.push(() => controller.close());
      const env = { LLMGW_AGENT_JOIN_TOKEN: joinToken };

      // 1. First join: the controller issues a secret; the agent keeps it, mode 0600; the store has its hash only.
      const first = await startAgent('node-x', controller.grpc, root, { env });
      cleanups.push(() => first.stop());
      const secretFile = join(root, 'node-x', 'data', 'agent', 'node-secret');
      const secret = await waitFor(() => (controller.plane.sessions.get('node-x') ? readFileSync(secretFile, 'utf8').trim() : undefined), { deadlineMs: 60_000, message: 'joined with a kept secret' });
      expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(statSync(secretFile).mode & 0o777).toBe(0o600);
      const store = await openStore(db.url);
      cleanups.push(() => store.close());
      expect(await store.nodes.credentialHash('node-x')).toBe(hashNodeSecret(secret));

      // 2. The agent restarts: it presents the secret and is welcomed again, with no new secret.
      await first.stop();
      await waitFor(() => controller.plane.sessions.get('node-x') === undefined, { deadlineMs: 10_000, message: 'stream closed' });
      const again = await startAgent('node-x', controller.grpc, root, { env });
      cleanups.push(() => again.stop());
      const session = await waitFor(() => controller.plane.sessions.get('node-x'), { deadlineMs: 60_000, message: 'rejoined' });
      expect(readFileSync(secretFile, 'utf8').trim()).toBe(secret);

      // 3. Another machine, set up with the same node id and the join token but its own state: refused, it stops (exit 78), the live session stays.
      const other = await startAgent('node-x', controller.grpc, root, { home: join(root, 'other-machine'), env, ready: false });
      const exit = await other.waitForExit(60_000);
      expect(exit.code).toBe(78);
      expect(other.stderr).toContain("PERMISSION_DENIED: node id 'node-x' is bound to another agent");
      expect(controller.plane.sessions.get('node-x')).toBe(session);
      for (const text of [first.stdout, first.stderr, again.stdout, again.stderr, other.stdout, other.stderr, JSON.stringify(controller.logs)]) expect(text).not.toContain(secret);
    },
    180_000,
  );

  it(
    'a catalog naming file:///etc/shadow (which the validator cannot judge) is refused by the agent: refused event, failed replica, no engine',
    async () => {
      const root = mkdtempSync(join(tmpdir(), 'llmgw-ctl-policy-'));
      cleanups.push(() => rmSync(root, { recursive: true, force: true }));
      symlinkSync('/etc/passwd', join(root, 'innocent.gguf'));
      const doc = {
        models: [
          { name: 'shadow', source: 'file:///etc/shadow', size: '1MB', replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB' }] },
          { name: 'link', source: `file://${join(root, 'innocent.gguf')}`, size: '1MB', replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB' }] },
        ],
      };
      const db = await sqliteBackend.create();
      const file = catalogFile(doc);
      cleanups.push(() => db.drop(), () => file.cleanup());
      const controller = await startController({ LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_SETTLE: '1s' });
      cleanups.push(() => controller.close());
      const agent = await startAgent('node-p', controller.grpc, root);
      cleanups.push(() => agent.stop());
      // Should an engine start after all (the attack succeeding), it is ended too.
      cleanups.push(() => {
        for (const r of controller.plane.nodes.get('node-p')?.reported.values() ?? []) if (r.pid !== undefined) enginePids.add(r.pid);
      });

      const eventsOf = async (model: string): Promise<{ kind: string; reason?: string }[]> =>
        ((await (await fetch(`${controller.http}/v1/admin/events?model=${model}`)).json()) as { events: { kind: string; reason?: string }[] }).events;
      const refusedOf = async (model: string): Promise<string | undefined> => (await eventsOf(model)).find((e) => e.kind === 'refused')?.reason;
      const shadow = await waitFor(() => refusedOf('shadow'), { deadlineMs: 60_000, message: 'shadow refused' });
      expect(shadow).toMatch(/^start refused by the agent: replica \S+ refused by this node's policy, nothing started:\n- weights source "file:\/\/\/etc\/shadow" is refused by this node's source policy: \/etc\/shadow is not under LLMGW_AGENT_SOURCE_DIRS/);
      const link = await waitFor(() => refusedOf('link'), { deadlineMs: 60_000, message: 'link refused' });
      expect(link).toMatch(/innocent\.gguf \(\/etc\/passwd once links are resolved\) is not under LLMGW_AGENT_SOURCE_DIRS/);
      // The replica failed with that reason (and is retried after a backoff, refused again).
      const failed = await waitFor(async () => (await eventsOf('shadow')).find((e) => e.kind === 'failed'), { deadlineMs: 30_000, message: 'shadow failed' });
      expect(failed.reason).toMatch(/^start refused: .*\/etc\/shadow is not under LLMGW_AGENT_SOURCE_DIRS/s);
      expect([...(controller.plane.nodes.get('node-p')?.reported.values() ?? [])].filter((r) => r.pid !== undefined)).toEqual([]);
    },
    120_000,
  );
});
