// Engine supervision end to end: the real agent process, the engine simulator as the engine, a
// fake controller sending the commands. Ready is reported; a crash is reported and restarted
// with backoff until the limit; stop is clean; and engines outlive a killed agent and are
// re-adopted — same pid, never restarted.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { cacheName } from '@llmgw/catalog';
import { CollectOutcome, EngineKind, ReplicaState, type ReplicaStatus, type StartReplica } from '@llmgw/proto';
import { processExists, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readProcStat } from '../state/proc-stat.reader';
import { AgentHome, EnginePids, startAgent } from '../runtime/test/agent-process.harness';
import { FakeController } from '../runtime/test/fake-controller.harness';
import { groupAlive } from './engine.process';

const TIMEOUT = 180_000;
const { REPLICA_STATE_STARTING: STARTING, REPLICA_STATE_READY: READY, REPLICA_STATE_FAILED: FAILED, REPLICA_STATE_STOPPED: STOPPED } = ReplicaState;

describe('engine supervision (real agent, sim-engine, fake controller)', () => {
  let home: AgentHome;
  let controller: FakeController;
  let weights: string;
  const engines = new EnginePids();

  beforeEach(async () => {
    home = new AgentHome();
    weights = join(home.root, 'tiny.gguf');
    writeFileSync(weights, 'not a real model: the simulator does not read it');
    controller = await FakeController.start({ kind: 'leader', heartbeatIntervalMs: 300 });
  });
  afterEach(async () => {
    await stopAllSpawned();
    engines.killAll();
    await controller.stop();
    home.remove();
  });

  function startReplica(over: Partial<StartReplica> = {}): Exclude<Parameters<FakeController['send']>[0], undefined> {
    const value: StartReplica = {
      commandId: '',
      replicaId: 'r-1',
      model: 'tiny',
      engine: EngineKind.ENGINE_KIND_LLAMACPP,
      weightsSource: `file://${weights}`,
      cacheName: '',
      servedName: 'tiny',
      aliases: [],
      gpuIndices: [],
      rank: 0,
      members: [],
      tensorParallel: 1,
      pipelineParallel: 1,
      engineArgs: [],
      env: {},
      ...over,
    };
    return { $case: 'startReplica', value };
  }

  /** Starts the agent, sends it r-1, and waits until r-1 is ready (its pid kept for cleanup). */
  async function readyReplica(): Promise<ReplicaStatus> {
    await startAgent(home, [controller.address]);
    await waitFor(() => controller.registers.length === 1, { deadlineMs: 60_000, message: 'Register' });
    controller.send(startReplica());
    const first = await controller.status('r-1', (s) => s.state === READY);
    engines.add(first.pid);
    return first;
  }

  /** Every pid the controller heard of for a replica, recorded for cleanup too. */
  function pidsOf(replicaId: string): Set<number> {
    const pids = new Set<number>();
    for (const s of controller.statuses) if (s.value.replicaId === replicaId && s.value.pid !== undefined) pids.add(s.value.pid);
    for (const pid of pids) engines.add(pid);
    return pids;
  }

  it(
    'StartReplica: starting then ready on the reported port; a repeated StartReplica starts nothing; StopReplica leaves nothing behind',
    async () => {
      await startAgent(home, [controller.address]);
      await waitFor(() => controller.registers.length === 1, { deadlineMs: 60_000, message: 'Register' });

      // Two StartReplica back to back (a controller retrying): one engine.
      const firstId = controller.send(startReplica());
      const secondId = controller.send(startReplica());
      expect(await controller.result(firstId)).toMatchObject({ ok: true, message: expect.stringMatching(/^starting replica r-1 on port \d+$/) });
      expect(await controller.result(secondId)).toMatchObject({ ok: true, message: expect.stringMatching(/already (being started|supervised)/) });
      const starting = await controller.status('r-1', (s) => s.state === STARTING && s.pid !== undefined);
      const ready = await controller.status('r-1', (s) => s.state === READY);
      engines.add(ready.pid);
      expect(ready.pid).toBe(starting.pid);
      expect(ready.port).toBeGreaterThan(0);
      expect(ready.restarts).toBe(0);
      const pid = ready.pid as number;

      // The engine really serves there, with the model name the controller asked for.
      const health = await fetch(`http://127.0.0.1:${ready.port}/health`);
      expect(health.status).toBe(200);
      const models = (await (await fetch(`http://127.0.0.1:${ready.port}/v1/models`)).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).toContain('tiny');
      // It leads its own process group (so stop reaches whatever it starts), with its output in a log file.
      expect(readProcStat(pid)?.pgrp).toBe(pid);
      expect(readFileSync(join(home.stateDir, 'logs', 'r-1.log'), 'utf8')).toContain('sim-engine listening');
      const record = JSON.parse(readFileSync(join(home.stateDir, 'engines', 'r-1.json'), 'utf8'));
      expect(record.process).toMatchObject({ pid, startTime: readProcStat(pid)?.startTime });
      // Heartbeats carry it.
      await waitFor(() => controller.heartbeats.some((h) => h.value.replicas.some((r) => r.replicaId === 'r-1' && r.state === READY && r.pid === pid)), {
        message: 'a heartbeat listing r-1 as ready',
      });

      // Idempotent: the same StartReplica again reports the state, starts no second engine.
      const seen = controller.statuses.length;
      const again = await controller.result(controller.send(startReplica()));
      expect(again.ok).toBe(true);
      expect(again.message).toMatch(/already supervised \(ready\)/);
      const reported = await controller.status('r-1', (s) => s.state === READY, { since: seen });
      expect(reported.pid).toBe(pid);
      expect(pidsOf('r-1')).toEqual(new Set([pid]));

      // Stop: SIGTERM, clean exit, nothing left: process, group, record, port.
      const stopped = await controller.result(controller.send({ $case: 'stopReplica', value: { commandId: '', replicaId: 'r-1', graceMs: 5_000 } }));
      expect(stopped).toMatchObject({ ok: true, message: 'replica r-1 stopped' });
      await controller.status('r-1', (s) => s.state === STOPPED);
      expect(processExists(pid)).toBe(false);
      expect(groupAlive(pid)).toBe(false);
      expect(existsSync(join(home.stateDir, 'engines', 'r-1.json'))).toBe(false);
      await expect(fetch(`http://127.0.0.1:${ready.port}/health`)).rejects.toThrow();
      expect(readFileSync(join(home.stateDir, 'logs', 'r-1.log'), 'utf8')).toContain('sim-engine stopping (SIGTERM)');
    },
    TIMEOUT,
  );

  it(
    'a crashed engine is reported failed with how it ended and its last log lines, then restarted',
    async () => {
      const first = await readyReplica();

      const seen = controller.statuses.length;
      process.kill(first.pid as number, 'SIGKILL');
      const failed = await controller.status('r-1', (s) => s.state === FAILED, { since: seen });
      expect(failed.signal).toBe('SIGKILL');
      expect(failed.exitCode).toBeUndefined();
      expect(failed.reason).toMatch(/^engine was killed by SIGKILL; restart 1\/2 in 300 ms$/);
      expect(failed.lastLogLines.join('\n')).toContain('sim-engine ready');
      const back = await controller.status('r-1', (s) => s.state === READY, { since: seen });
      engines.add(back.pid);
      expect(back.pid).not.toBe(first.pid);
      expect(back.restarts).toBe(1);
      expect(back.port).toBe(first.port);
      expect((await fetch(`http://127.0.0.1:${back.port}/health`)).status).toBe(200);
    },
    TIMEOUT,
  );

  it(
    'a crash while no leader listens is restarted, and reported to the next leader after its Welcome',
    async () => {
      const first = await readyReplica();

      // The controller stops leading: the agent keeps reconnecting and is told NotLeader.
      controller.mode = { kind: 'not-leader' };
      controller.dropStreams();
      const registered = controller.registers.length;
      await waitFor(() => controller.registers.length > registered, { deadlineMs: 20_000, message: 'the agent back, told NotLeader' });
      const statusesBefore = controller.statuses.length;
      process.kill(first.pid as number, 'SIGKILL');
      // Its Registers (to a standby) show the engine restarted by the agent.
      await waitFor(
        () => controller.registers.some((r) => r.value.replicas.some((x) => x.replicaId === 'r-1' && x.restarts === 1 && x.state === READY)),
        { deadlineMs: 60_000, message: 'restarted while no leader listened' },
      );
      expect(controller.statuses.length).toBe(statusesBefore);
      expect(controller.unheard).toEqual([]);

      // It leads again: right after the Welcome the agent says what nobody heard.
      controller.mode = { kind: 'leader', heartbeatIntervalMs: 300 };
      const report = await waitFor(() => controller.unheard[0], { deadlineMs: 20_000, message: 'UnheardFailures' });
      expect(report.value.failures).toHaveLength(1);
      const [failure] = report.value.failures;
      expect(failure.status).toMatchObject({ replicaId: 'r-1', state: FAILED, signal: 'SIGKILL', restarts: 0 });
      expect(failure.status?.reason).toMatch(/^engine was killed by SIGKILL; restart 1\/2 in 300 ms$/);
      expect(failure.atUnixMs).toBeGreaterThan(Date.now() - 120_000);
      pidsOf('r-1');
      for (const r of controller.registers) for (const x of r.value.replicas) if (x.pid !== undefined) engines.add(x.pid);
      // Said once: a later stream carries nothing more.
      controller.dropStreams();
      await waitFor(() => controller.heartbeats.some((h) => h.stream > report.stream), { deadlineMs: 20_000, message: 'a new stream' });
      expect(controller.unheard).toHaveLength(1);
    },
    TIMEOUT,
  );

  it(
    'a ready engine frozen with SIGSTOP is reported not ready, stopped and restarted with the crash backoff',
    async () => {
      await startAgent(home, [controller.address], { LLMGW_AGENT_LIVENESS_INTERVAL: '200ms', LLMGW_AGENT_LIVENESS_TIMEOUT: '200ms', LLMGW_AGENT_LIVENESS_FAILURES: '3' });
      await waitFor(() => controller.registers.length === 1, { deadlineMs: 60_000, message: 'Register' });
      controller.send(startReplica());
      const first = await controller.status('r-1', (s) => s.state === READY);
      engines.add(first.pid);
      const pid = first.pid as number;

      // Frozen: the process and its port stay, nothing answers. SIGTERM alone would wait until it runs again.
      const seen = controller.statuses.length;
      process.kill(-pid, 'SIGSTOP');
      const notReady = await controller.status('r-1', (s) => s.state === STARTING, { since: seen });
      expect(notReady.reason).toMatch(/^engine unresponsive: 3 health check\(s\) in a row failed, the last with no answer within 200 ms at http:\/\/127\.0\.0\.1:\d+\/health; restarting it$/);
      const failed = await controller.status('r-1', (s) => s.state === FAILED, { since: seen });
      expect(failed.reason).toMatch(/^engine unresponsive: .*; restart 1\/2 in 300 ms$/);
      const back = await controller.status('r-1', (s) => s.state === READY, { since: seen });
      engines.add(back.pid);
      expect(back.pid).not.toBe(pid);
      expect(back.restarts).toBe(1);
      expect((await fetch(`http://127.0.0.1:${back.port}/health`)).status).toBe(200);
      // The frozen one was woken to act on SIGTERM, and is gone with its whole group.
      expect(processExists(pid)).toBe(false);
      expect(groupAlive(pid)).toBe(false);
      expect(readFileSync(join(home.stateDir, 'logs', 'r-1.log'), 'utf8')).toContain('sim-engine stopping (SIGTERM)');
    },
    TIMEOUT,
  );

  it(
    'an engine that keeps crashing is restarted with doubling delays up to the limit, then stays failed',
    async () => {
      await startAgent(home, [controller.address]);
      await waitFor(() => controller.registers.length === 1, { deadlineMs: 60_000, message: 'Register' });
      controller.send(startReplica({ engineArgs: ['--no-such-flag'] }));

      const failures = await waitFor(
        () => {
          const f = controller.statuses.filter((s) => s.value.replicaId === 'r-1' && s.value.state === FAILED);
          return f.length >= 3 ? f : undefined;
        },
        { deadlineMs: 90_000, message: 'three failures' },
      );
      pidsOf('r-1');
      const reasons = failures.map((f) => f.value.reason);
      expect(reasons[0]).toMatch(/^engine exited with code 2; restart 1\/2 in 300 ms$/);
      expect(reasons[1]).toMatch(/^engine exited with code 2; restart 2\/2 in 600 ms$/);
      expect(reasons[2]).toMatch(/^engine exited with code 2; gave up after 2 restart\(s\)$/);
      for (const f of failures) {
        expect(f.value.exitCode).toBe(2);
        expect(f.value.lastLogLines.join('\n')).toContain('unknown flag --no-such-flag');
      }
      expect(failures.map((f) => f.value.restarts)).toEqual([0, 1, 2]);
      // The announced delays are really waited.
      expect(failures[1].at - failures[0].at).toBeGreaterThanOrEqual(300);
      expect(failures[2].at - failures[1].at).toBeGreaterThanOrEqual(600);

      // Then it stays failed: several heartbeats later, no new attempt.
      const count = controller.statuses.length;
      const beats = controller.heartbeats.length;
      await waitFor(() => controller.heartbeats.length >= beats + 5, { deadlineMs: 30_000, message: 'five more heartbeats' });
      expect(controller.statuses.length).toBe(count);
      const last = controller.heartbeats[controller.heartbeats.length - 1].value.replicas.find((r) => r.replicaId === 'r-1');
      expect(last).toMatchObject({ state: FAILED, restarts: 2 });
      expect(last?.pid).toBeUndefined();
      expect(last?.reason).toMatch(/gave up/);
    },
    TIMEOUT,
  );

  it(
    'kill -9 of the agent leaves the engine running; the next agent re-adopts it (same pid, not restarted) and reports it in Register',
    async () => {
      const env = { LLMGW_AGENT_FAKE_GPUS: '1xL4-24GB' };
      const first = await startAgent(home, [controller.address], env);
      await waitFor(() => controller.registers.length === 1, { deadlineMs: 60_000, message: 'Register' });
      // vLLM flavour: refuses connections while it "loads" for a second.
      controller.send(startReplica({ replicaId: 'r-v', engine: EngineKind.ENGINE_KIND_VLLM, gpuIndices: [0], engineArgs: ['--load-seconds', '1'] }));
      const ready = await controller.status('r-v', (s) => s.state === READY);
      engines.add(ready.pid);
      const pid = ready.pid as number;
      const startTime = readProcStat(pid)?.startTime;
      expect(startTime).toBeDefined();

      await first.kill9();
      expect(processExists(pid)).toBe(true);
      expect((await fetch(`http://127.0.0.1:${ready.port}/health`)).status).toBe(200);

      const seen = controller.statuses.length;
      await startAgent(home, [controller.address], env);
      const register = await waitFor(() => controller.registers[1]?.value, { deadlineMs: 60_000, message: 'second Register' });
      expect(register.replicas).toEqual([
        expect.objectContaining({ replicaId: 'r-v', model: 'tiny', engine: EngineKind.ENGINE_KIND_VLLM, state: READY, pid, port: ready.port, gpuIndices: [0], restarts: 0 }),
      ]);
      // The very same process: pid and start time unchanged, never a new engine.
      expect(readProcStat(pid)?.startTime).toBe(startTime);
      expect(pidsOf('r-v')).toEqual(new Set([pid]));
      expect(controller.statuses.slice(seen).some((s) => s.value.state === STARTING && s.value.pid !== pid)).toBe(false);

      // A StartReplica for it now is answered, not acted on.
      const again = await controller.result(controller.send(startReplica({ replicaId: 'r-v', engine: EngineKind.ENGINE_KIND_VLLM, gpuIndices: [0], engineArgs: ['--load-seconds', '1'] })));
      expect(again.message).toMatch(/already supervised \(ready\)/);

      // The adopted engine is still supervised: a crash is noticed by polling and restarted.
      const before = controller.statuses.length;
      process.kill(pid, 'SIGKILL');
      const failed = await controller.status('r-v', (s) => s.state === FAILED, { since: before });
      expect(failed.reason).toMatch(/status unknown/);
      const back = await controller.status('r-v', (s) => s.state === READY, { since: before });
      engines.add(back.pid);
      expect(back.pid).not.toBe(pid);

      // And stopping it through the new agent is clean.
      const stopped = await controller.result(controller.send({ $case: 'stopReplica', value: { commandId: '', replicaId: 'r-v' } }));
      expect(stopped.ok).toBe(true);
      expect(processExists(back.pid as number)).toBe(false);
    },
    TIMEOUT,
  );

  it(
    'fetches weights over the stream, starts a replica on them, and refuses to collect them while in use',
    async () => {
      const body = Buffer.alloc(200_000, 7);
      const server = await serve(body);
      try {
        const source = `http://127.0.0.1:${(server.address() as AddressInfo).port}/models/tiny.gguf`;
        const name = cacheName(source) as string;
        await startAgent(home, [controller.address]);
        await waitFor(() => controller.registers.length === 1, { deadlineMs: 60_000, message: 'Register' });

        const fetched = await controller.result(
          controller.send({ $case: 'fetchWeights', value: { commandId: '', source, cacheName: name, sizeBytes: body.length, sha256: sha256(body) } }),
        );
        expect(fetched.ok, fetched.message).toBe(true);
        expect(readFileSync(join(home.cacheDir, name)).equals(body)).toBe(true);

        controller.send(startReplica({ replicaId: 'r-w', weightsSource: source, cacheName: name }));
        const ready = await controller.status('r-w', (s) => s.state === READY);
        engines.add(ready.pid);

        const inUse = await controller.result(controller.send({ $case: 'collectWeights', value: { commandId: '', paths: [name, '../etc'] } }));
        expect(inUse.paths).toEqual([
          { path: name, outcome: CollectOutcome.COLLECT_OUTCOME_REFUSED, reason: `${name} is in use by replica r-w` },
          expect.objectContaining({ path: '../etc', outcome: CollectOutcome.COLLECT_OUTCOME_REFUSED }),
        ]);
        expect(existsSync(join(home.cacheDir, name))).toBe(true);

        await controller.result(controller.send({ $case: 'stopReplica', value: { commandId: '', replicaId: 'r-w', graceMs: 5_000 } }));
        const collected = await controller.result(controller.send({ $case: 'collectWeights', value: { commandId: '', paths: [join(home.cacheDir, name)] } }));
        expect(collected).toMatchObject({ ok: true, paths: [{ outcome: CollectOutcome.COLLECT_OUTCOME_REMOVED, reason: '' }] });
        expect(existsSync(join(home.cacheDir, name))).toBe(false);

        // Weights not fetched yet: the replica fetches them first, reporting progress, then starts.
        const other = `http://127.0.0.1:${(server.address() as AddressInfo).port}/models/other.gguf`;
        controller.send(startReplica({ replicaId: 'r-f', weightsSource: other, cacheName: cacheName(other) as string }));
        const fetching = await controller.status('r-f', (s) => s.state === ReplicaState.REPLICA_STATE_FETCHING && s.fetchedBytes === body.length);
        expect(fetching.fetchTotalBytes).toBe(body.length);
        const readyAfterFetch = await controller.status('r-f', (s) => s.state === READY);
        engines.add(readyAfterFetch.pid);
        expect(readFileSync(join(home.cacheDir, cacheName(other) as string)).equals(body)).toBe(true);
      } finally {
        server.close();
      }
    },
    TIMEOUT,
  );
});


describe('the node source policy against a hostile controller (real agent, fake controller)', () => {
  let home: AgentHome;
  let controller: FakeController;
  let weights: string;

  beforeEach(async () => {
    home = new AgentHome();
    weights = join(home.root, 'tiny.gguf');
    writeFileSync(weights, 'not a real model');
    controller = await FakeController.start({ kind: 'leader', heartbeatIntervalMs: 300 });
  });
  afterEach(async () => {
    await stopAllSpawned();
    await controller.stop();
    home.remove();
  });

  it(
    'refuses file:///etc/shadow, a link out of the allowed directory, LD_PRELOAD and NODE_OPTIONS, loopback and metadata URLs: nothing starts, nothing is fetched',
    async () => {
      // A real server on loopback, which this agent is not told to allow (the attack: catalog points the node at its own services).
      const requests: string[] = [];
      const local = createServer((req, res) => {
        requests.push(req.url ?? '');
        res.end('secret');
      });
      await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
      const port = (local.address() as AddressInfo).port;
      symlinkSync('/etc/passwd', join(home.root, 'innocent.gguf'));
      try {
        await startAgent(home, [controller.address], { LLMGW_AGENT_SOURCE_ALLOW_NETS: '' });
        await waitFor(() => controller.registers.length === 1, { deadlineMs: 60_000, message: 'Register' });
        const start = (over: Partial<StartReplica>) =>
          controller.result(
            controller.send({
              $case: 'startReplica',
              value: { commandId: '', replicaId: 'r', model: 'tiny', engine: EngineKind.ENGINE_KIND_LLAMACPP, weightsSource: `file://${weights}`, cacheName: '', servedName: 'tiny', aliases: [], gpuIndices: [], rank: 0, members: [], tensorParallel: 1, pipelineParallel: 1, engineArgs: [], env: {}, ...over },
            }),
          );
        const fetchWeights = (source: string) =>
          controller.result(controller.send({ $case: 'fetchWeights', value: { commandId: '', source, cacheName: cacheName(source) as string } }));

        const shadow = await start({ replicaId: 'r-shadow', weightsSource: 'file:///etc/shadow' });
        expect(shadow.ok).toBe(false);
        expect(shadow.message).toMatch(/weights source "file:\/\/\/etc\/shadow" is refused by this node's source policy: \/etc\/shadow is not under LLMGW_AGENT_SOURCE_DIRS/);

        const link = await start({ replicaId: 'r-link', weightsSource: `file://${join(home.root, 'innocent.gguf')}` });
        expect(link.ok).toBe(false);
        expect(link.message).toMatch(/innocent\.gguf \(\/etc\/passwd once links are resolved\) is not under LLMGW_AGENT_SOURCE_DIRS/);

        const dotdot = await start({ replicaId: 'r-dots', weightsSource: `file://${home.root}/%2e%2e/%2e%2e/etc/passwd` });
        expect(dotdot.ok).toBe(false);
        expect(dotdot.message).toMatch(/\. or \.\. segments/);

        const env = await start({ replicaId: 'r-env', env: { LD_PRELOAD: weights, NODE_OPTIONS: '--require /tmp/x.js' } });
        expect(env.ok).toBe(false);
        expect(env.message).toMatch(/env LD_PRELOAD may not be set by a catalog/);
        expect(env.message).toMatch(/env NODE_OPTIONS may not be set by a catalog/);

        const flag = await start({ replicaId: 'r-flag', engineArgs: ['-m/etc/shadow'] });
        expect(flag.ok).toBe(false);
        expect(flag.message).toMatch(/-m is set by llmgw from source/);

        const localPath = await start({ replicaId: 'r-local', localPath: '/etc/shadow' });
        expect(localPath.ok).toBe(false);
        expect(localPath.message).toMatch(/localPath "\/etc\/shadow" is refused/);

        const loopbackStart = await start({ replicaId: 'r-loop', weightsSource: `http://127.0.0.1:${port}/m.gguf`, cacheName: cacheName(`http://127.0.0.1:${port}/m.gguf`) as string });
        expect(loopbackStart.ok).toBe(false);
        expect(loopbackStart.message).toMatch(/127\.0\.0\.1 is in a refused range \(loopback/);

        const loopback = await fetchWeights(`http://127.0.0.1:${port}/models/x.gguf`);
        expect(loopback.ok).toBe(false);
        expect(loopback.message).toMatch(/127\.0\.0\.1 is in a refused range \(loopback 127\.0\.0\.0\/8\); list its network in LLMGW_AGENT_SOURCE_ALLOW_NETS/);

        // A host name is checked on the address it resolves to, when connecting.
        const byName = await fetchWeights(`http://localhost:${port}/models/x.gguf`);
        expect(byName.ok).toBe(false);
        expect(byName.message).toMatch(/refused to connect to localhost: it resolves to (127\.0\.0\.1|::1), which is in a refused range \(loopback/);

        const metadata = await fetchWeights('http://169.254.169.254/latest/meta-data/iam/security-credentials/');
        expect(metadata.ok).toBe(false);
        expect(metadata.message).toMatch(/169\.254\.169\.254 is in a refused range \(link-local/);

        // Nothing ran and nothing was fetched: no engine, no engine log, no request, an empty cache.
        expect(controller.statuses.filter((s) => s.value.pid !== undefined)).toEqual([]);
        const logs = join(home.stateDir, 'logs');
        expect(existsSync(logs) ? readdirSync(logs) : []).toEqual([]);
        expect(requests).toEqual([]);
        expect(readdirSync(home.cacheDir)).toEqual([]);
      } finally {
        local.close();
      }
    },
    TIMEOUT,
  );
});

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function serve(body: Buffer): Promise<Server> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-length': body.length });
    res.end(body);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
