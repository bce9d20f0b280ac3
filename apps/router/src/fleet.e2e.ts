// Three llmgw-router processes behind the deploy nginx configuration (deploy/nginx/llmgw.conf),
// in front of two sim-engine replicas, under steady load; one router is killed with SIGKILL.
// nginx sends every request that had not started answering to the next router, so no
// non-streaming request fails; a stream the dead router was in the middle of ends with an error
// the client sees (the response is cut before its last chunk: no process is left to write an SSE
// error event, and nginx cannot add one), never as a clean end without [DONE]; none hangs, and
// streams started after the kill are served by the survivors.
import { inheritedTestEnv, nginxPrefix, runTsEntry, spawnProcess, startNginx, stopAllSpawned, waitFor, type SpawnedProcess } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { startSimEngine, tempDir, writeRouterConfig } from './test/router.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

const body = (stream: boolean): string => JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: stream ? 48 : 8, stream });

describe('three routers behind nginx', () => {
  it(
    'router kill -9 under load: 0 failed non-streaming requests, streams it was serving end with an error the client sees, none hangs or ends silently, later ones are served',
    async () => {
      const engine = ['--engine', 'vllm', '--served-model-name', 'tiny', '--decode-tps', '60'];
      const replicas = await Promise.all([startSimEngine([...engine, '--seed', '1'], 'sim-a'), startSimEngine([...engine, '--seed', '2'], 'sim-b')]);
      const dir = tempDir();
      const config = writeRouterConfig(dir, { models: [{ name: 'tiny', engine: 'vllm' }], endpoints: replicas.map((r, i) => ({ id: `replica-${i}`, model: 'tiny', url: r.url })) });
      const clean = inheritedTestEnv();
      const routers: SpawnedProcess[] = await Promise.all(
        [1, 2, 3].map((i) =>
          spawnProcess({
            ...runTsEntry('apps/router/src/main.ts'),
            name: `llmgw-router ${i}`,
            cleanEnv: true,
            env: { ...clean, LLMGW_ROUTER_PORT: '0', LLMGW_DATA_DIR: dir, LLMGW_ROUTER_CONFIG_FILE: config },
            readyWhen: { stdoutMatch: /llmgw-router listening on http:\/\/(127\.0\.0\.1:\d+)/ },
            deadlineMs: 90_000,
          }),
        ),
      );
      const prefix = await nginxPrefix(routers.map((r) => r.readyMatch?.[1] as string));
      cleanups.push(() => prefix.remove());
      const nginx = await startNginx(prefix);
      cleanups.push(() => nginx.stop('SIGTERM', 5_000));
      const entry = `http://127.0.0.1:${prefix.port}/v1/chat/completions`;

      const plain = { ok: 0, failed: [] as string[] };
      // cut: ended with an error the client sees; silent: ended cleanly but without [DONE] (a
      // truncated answer a client could take for a whole one).
      const streams = { ok: 0, cut: 0, silent: 0, hung: 0, failed: [] as string[], okAfterKill: 0 };
      let killedAt = Number.POSITIVE_INFINITY;
      let loading = true;
      const post = (stream: boolean): Promise<Response> =>
        fetch(entry, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(stream), signal: AbortSignal.timeout(60_000) });
      const plainClient = async (): Promise<void> => {
        while (loading) {
          try {
            const res = await post(false);
            const text = await res.text();
            if (res.status === 200 && text.includes('"choices"')) plain.ok += 1;
            else plain.failed.push(`${res.status} ${text.slice(0, 200)}`);
          } catch (error) {
            plain.failed.push(String(error));
          }
        }
      };
      const streamClient = async (): Promise<void> => {
        while (loading) {
          const startedAt = Date.now();
          let res: Response;
          try {
            res = await post(true);
          } catch (error) {
            streams.failed.push(String(error));
            continue;
          }
          if (res.status !== 200) {
            streams.failed.push(`${res.status} ${(await res.text()).slice(0, 200)}`);
            continue;
          }
          try {
            const text = await res.text();
            if (text.includes('data: [DONE]') && !text.includes('"error"')) {
              streams.ok += 1;
              if (startedAt > killedAt) streams.okAfterKill += 1;
            } else if (/^data: \{"error"/m.test(text)) streams.cut += 1;
            else streams.silent += 1;
          } catch (error) {
            // The connection to nginx ended mid-body: the router it was on died.
            if ((error as Error).name === 'TimeoutError') streams.hung += 1;
            else streams.cut += 1;
          }
        }
      };
      const clients = [...Array.from({ length: 8 }, plainClient), ...Array.from({ length: 8 }, streamClient)];
      await waitFor(() => plain.ok >= 20 && streams.ok >= 16, { deadlineMs: 60_000, message: 'load flowing through nginx' });

      // The router about to die is carrying requests.
      const victim = `http://${routers[1].readyMatch?.[1] as string}`;
      const inFlight = async (): Promise<number> =>
        [...(await (await fetch(`${victim}/metrics`)).text()).matchAll(/^llmgw_router_in_flight\{[^}]*\} (\S+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
      await waitFor(async () => (await inFlight()) >= 2, { deadlineMs: 30_000, intervalMs: 10, message: 'requests in flight on the router to kill' });
      killedAt = Date.now();
      await routers[1].kill9();
      await waitFor(() => streams.okAfterKill >= 16, { deadlineMs: 60_000, message: 'streams served after the kill' });
      const plainAtKill = plain.ok;
      await waitFor(() => plain.ok >= plainAtKill + 20, { deadlineMs: 60_000, message: 'requests served after the kill' });
      loading = false;
      await Promise.all(clients);
      console.log(`router kill -9 behind nginx: plain ${plain.ok} ok, ${plain.failed.length} failed; streams ${JSON.stringify({ ...streams, failed: streams.failed.length })}`);

      expect(plain.failed).toEqual([]);
      expect(streams.failed).toEqual([]);
      expect(streams.hung).toBe(0);
      expect(streams.silent).toBe(0);
      // At most the streams the dead router was serving were cut.
      expect(streams.cut).toBeLessThanOrEqual(8);
    },
    240_000,
  );
});
