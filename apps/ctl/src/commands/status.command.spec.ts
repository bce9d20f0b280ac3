import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeServer, type FakeServer } from '../test/fake-admin.server';
import { runCtl } from '../test/cli-run';
import { STATUS } from '../test/cluster.fixture';
import { createStatusCommand } from './status.command';

const TOKEN = 'ctl-test-token-0123456789';
const commands = [createStatusCommand()];
let server: FakeServer;

beforeAll(async () => {
  server = await startFakeServer({ 'GET /v1/admin/status': { body: STATUS } }, TOKEN);
});
afterAll(() => server.close());

describe('llmgw status', () => {
  it('summarises a fixed cluster: bars, fabric line, replicas, unplaceable, unused with - for unknown', async () => {
    const r = await runCtl(commands, ['status', '--controller', server.url, '--token', TOKEN]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatchInlineSnapshot(`
      "controller ctl-7f3a: leader, active, catalog revision 12
      nodes: 7 — 5 healthy, 1 unreachable, 1 lost; 1 cordoned

      GPU capacity   # used  ! unhealthy  ~ unavailable (cordoned, unreachable, lost)  . free
      CLASS      USAGE                   USED  FREE  UNHEALTHY  UNAVAILABLE  TOTAL  USED%
      A100-80GB  [#####...............]     2     6          0            0      8    25%
      H100-80GB  [#############!~~....]    15     5          1            3     24    63%
      L4         [~~~~~~~~~~~~~~~~~~~~]     0     0          0            4      4     0%
      free whole nodes per fabric: ib-east 1/3, ib-west 0/2

      replicas: 11 — fetching 1, starting 1, ready 7, draining 1, failed 1
      models: 6 — 4 satisfied, 1 unplaceable

      UNPLACEABLE
      llama-3.1-405b-instruct: no profile fits (4 attempts)
        profile 0 (vllm 2 nodes × 8×H100-80GB):
          needs 2 whole nodes on one fabric; ib-east has 1 free, ib-west has 0 free

      LONGEST UNUSED (ready replicas)
      REPLICA      MODEL                   NODE     IDLE
      r-qwen-1     qwen2.5-0.5b-instruct   cpu-1    3d4h
      r-mistral-2  mistral-7b-instruct-q4  gpu-h-2    5h
      r-llama8b-1  llama-3.1-8b-instruct   gpu-h-1   42s
      2 ready replicas with no use reported by any router: idle - (unknown, not idle)
      "
    `);
    expect(server.requests.at(-1)?.headers.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it('prints the same data as JSON with --json', async () => {
    const r = await runCtl(commands, ['status', '--json', '--controller', server.url, '--token', TOKEN]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual(STATUS);
  });

  it('lists only --top N unused replicas and says how many more there are', async () => {
    const r = await runCtl(commands, ['status', '--top', '1', '--controller', server.url, '--token', TOKEN]);
    expect(r.out).toContain('r-qwen-1');
    expect(r.out).not.toContain('r-mistral-2');
    expect(r.out).toContain('… 2 more ready replicas used more recently');
  });

  it('uses colour only on a terminal, and never with NO_COLOR', async () => {
    const tty = await runCtl(commands, ['status', '--controller', server.url, '--token', TOKEN], { isTTY: true });
    expect(tty.out).toContain('\x1b[31m1 unplaceable\x1b[0m');
    const noColor = await runCtl(commands, ['status', '--controller', server.url, '--token', TOKEN], { isTTY: true, env: { NO_COLOR: '1' } });
    expect(noColor.out).not.toContain('\x1b[');
  });

  it('fails with exit 1 and says how to give a token when the controller refuses it', async () => {
    const r = await runCtl(commands, ['status', '--controller', server.url, '--token', 'wrong-token-0123456789']);
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toBe(
      'llmgw: controller: GET /v1/admin/status: 401 missing or wrong admin token (pass --token, set LLMGW_ADMIN_TOKEN or `token:` in the config file)\n',
    );
    const json = await runCtl(commands, ['status', '--json', '--controller', server.url]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.out)).toEqual({ error: { message: expect.stringContaining('401'), status: 401, problems: [] } });
  });

  it('fails with exit 1 naming the URL when nothing answers, and exit 2 on bad usage', async () => {
    const closed = await startFakeServer();
    const url = closed.url;
    await closed.close();
    const down = await runCtl(commands, ['status', '--controller', url]);
    expect(down.code).toBe(1);
    expect(down.err).toMatch(new RegExp(`^llmgw: cannot reach the controller at ${url} \\(ECONNREFUSED\\)`));
    expect((await runCtl(commands, ['status', '--top', 'x', '--controller', url])).code).toBe(2);
    expect((await runCtl(commands, ['status', '--bogus'])).code).toBe(2);
    expect((await runCtl(commands, ['status', 'extra'])).code).toBe(2);
    const badUrl = await runCtl(commands, ['status', '--controller', 'ftp://x']);
    expect(badUrl.code).toBe(2);
    expect(badUrl.err).toContain('--controller "ftp://x": expected a URL starting http: or https:');
  });
});
