// The real agent process against fake controllers: Register then Welcome then heartbeats at the
// interval the controller sets; NotLeader followed to the leader; a rejected join token ends the
// process with a clear error instead of a retry loop; the node id survives a restart.
import { readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
import { stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentHome, startAgent } from '../runtime/test/agent-process.harness';
import { FakeController } from '../runtime/test/fake-controller.harness';
import { JOIN_REJECTED_EXIT_CODE } from './controller.connection';

const TIMEOUT = 120_000;

describe('llmgw-agent ↔ controller stream (real agent process, fake controllers)', () => {
  const homes: AgentHome[] = [];
  const controllers: FakeController[] = [];
  afterEach(async () => {
    await stopAllSpawned();
    await Promise.all(controllers.splice(0).map((c) => c.stop()));
    for (const h of homes.splice(0)) h.remove();
  });
  const home = (): AgentHome => {
    const h = new AgentHome();
    homes.push(h);
    return h;
  };
  const controller = async (...args: Parameters<typeof FakeController.start>): Promise<FakeController> => {
    const c = await FakeController.start(...args);
    controllers.push(c);
    return c;
  };

  it(
    'registers first with hardware and cache entries, then heartbeats at the interval Welcome sets; the node id is stable across restarts',
    async () => {
      const h = home();
      writeFileSync(join(h.cacheDir, 'llmgw-0123456789abcdef-tiny.gguf'), Buffer.alloc(1234));
      utimesSync(join(h.cacheDir, 'llmgw-0123456789abcdef-tiny.gguf'), 1_700_000_000, 1_700_000_000);
      const leader = await controller({ kind: 'leader', heartbeatIntervalMs: 300 });
      const agent = await startAgent(h, [leader.address], {
        LLMGW_AGENT_FAKE_GPUS: '2xH100-80GB',
        LLMGW_AGENT_LABELS: 'zone=a,rack=7',
        LLMGW_AGENT_FABRIC: 'ib-1',
        LLMGW_AGENT_ADVERTISE_ADDRESS: '10.1.2.3',
      });

      const register = await waitFor(() => leader.registers[0]?.value, { deadlineMs: 30_000, message: 'Register' });
      const nodeId = readFileSync(join(h.stateDir, 'node-id'), 'utf8').trim();
      expect(register.nodeId).toBe(nodeId);
      expect(register.address).toBe('10.1.2.3');
      expect(register.labels).toEqual({ zone: 'a', rack: '7' });
      expect(register.fabric).toBe('ib-1');
      expect(register.gpus.map((g) => [g.index, g.gpuClass])).toEqual([
        [0, 'H100-80GB'],
        [1, 'H100-80GB'],
      ]);
      // Fake GPUs measure nothing: utilisation is unset on the wire, not 0.
      expect(register.gpus[0].utilizationPct).toBeUndefined();
      expect(register.cpuCores).toBeGreaterThan(0);
      expect(register.cache?.dir).toBe(h.cacheDir);
      expect(register.cache?.freeBytes).toBeGreaterThan(0);
      expect(register.cache?.entries).toEqual([{ name: 'llmgw-0123456789abcdef-tiny.gguf', sizeBytes: 1234, modifiedUnixMs: 1_700_000_000_000 }]);
      expect(register.replicas).toEqual([]);
      expect(leader.authorizations[0]).toBeUndefined();

      // Heartbeats at ~300 ms: count them over a window and check the spacing.
      await waitFor(() => leader.heartbeats.length >= 6, { deadlineMs: 30_000, message: 'six heartbeats' });
      const at = leader.heartbeats.map((hb) => hb.at);
      const gaps = at.slice(1).map((t, i) => t - at[i]);
      const median = [...gaps].sort((a, b) => a - b)[Math.floor(gaps.length / 2)];
      expect(median).toBeGreaterThan(200);
      expect(median).toBeLessThan(600);
      expect(leader.heartbeats[0].at - leader.registers[0].at).toBeGreaterThan(200);
      const hb = leader.heartbeats[0].value;
      expect(hb.gpus.map((g) => g.index)).toEqual([0, 1]);
      expect(hb.cacheFreeBytes).toBeGreaterThan(0);
      // The listing went with Register; a heartbeat carries it again only when the cache changed.
      expect(leader.heartbeats.every((x) => x.value.cacheListing === undefined)).toBe(true);
      const before = leader.heartbeats.length;
      writeFileSync(join(h.cacheDir, 'operator-copy.bin'), 'x');
      const changed = await waitFor(() => leader.heartbeats.slice(before).find((x) => x.value.cacheListing !== undefined)?.value, {
        deadlineMs: 10_000,
        message: 'a heartbeat with the new listing',
      });
      expect(changed.cacheListing?.entries.map((e) => e.name)).toEqual(['llmgw-0123456789abcdef-tiny.gguf', 'operator-copy.bin']);

      // Same state directory, new process: same node id.
      await agent.stop();
      const again = await startAgent(h, [leader.address]);
      await waitFor(() => leader.registers.length >= 2, { deadlineMs: 30_000, message: 'second Register' });
      expect(leader.registers[1].value.nodeId).toBe(nodeId);
      await again.stop();
    },
    TIMEOUT,
  );

  it(
    'follows NotLeader to the leader it names, and moves past an address that does not answer',
    async () => {
      const leader = await controller({ kind: 'leader', heartbeatIntervalMs: 500 });
      const standby = await controller({ kind: 'not-leader', leaderAddress: leader.address });
      const unknowing = await controller({ kind: 'not-leader' });
      const dead = await controller({ kind: 'leader', heartbeatIntervalMs: 500 });
      const deadAddress = dead.address;
      await dead.stop();

      // Dead first, then a standby that does not know the leader, then one that does.
      await startAgent(home(), [deadAddress, unknowing.address, standby.address], { LLMGW_AGENT_JOIN_TOKEN: 's3cret-0123456789abcdef' });
      await waitFor(() => leader.heartbeats.length >= 1, { deadlineMs: 60_000, message: 'heartbeat at the leader' });
      expect(unknowing.registers.length).toBeGreaterThanOrEqual(1);
      expect(standby.registers.length).toBeGreaterThanOrEqual(1);
      expect(leader.registers.length).toBe(1);
      expect(standby.heartbeats).toHaveLength(0);
      // The token travels on every stream as call metadata.
      expect(new Set([...standby.authorizations, ...leader.authorizations])).toEqual(new Set(['Bearer s3cret-0123456789abcdef']));
    },
    TIMEOUT,
  );

  it(
    'a rejected join token stops the agent with a clear error and a non-zero exit, after one attempt',
    async () => {
      const strict = await controller({ kind: 'leader', heartbeatIntervalMs: 500 }, 'the-right-token');
      const agent = await startAgent(home(), [strict.address], { LLMGW_AGENT_JOIN_TOKEN: 'a-wrong-token-0123456789' });
      const exit = await agent.waitForExit(30_000);
      expect(exit.code).toBe(JOIN_REJECTED_EXIT_CODE);
      expect(agent.stderr).toMatch(/controller 127\.0\.0\.1:\d+ rejected this agent \(UNAUTHENTICATED: join token not accepted\)/);
      expect(agent.stderr).toContain('LLMGW_AGENT_JOIN_TOKEN');
      expect(agent.stderr + agent.stdout).not.toContain('a-wrong-token-0123456789');
      expect(strict.streamCount).toBe(1);
      expect(strict.registers).toHaveLength(0);
    },
    TIMEOUT,
  );

  it(
    'PERMISSION_DENIED is a rejection too',
    async () => {
      const strict = await controller({ kind: 'reject', code: status.PERMISSION_DENIED, details: 'node not allowed' });
      const agent = await startAgent(home(), [strict.address]);
      const exit = await agent.waitForExit(30_000);
      expect(exit.code).toBe(JOIN_REJECTED_EXIT_CODE);
      expect(agent.stderr).toContain('PERMISSION_DENIED: node not allowed');
      expect(strict.streamCount).toBe(1);
    },
    TIMEOUT,
  );
});
