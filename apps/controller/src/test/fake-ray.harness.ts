// Test-only: fake `ray` and `vllm` executables for one simulated node, so a multi-node vLLM
// replica runs end to end without Ray or vLLM. Each call appends its argv (and RAY_ADDRESS) to
// the node's calls file. They behave like the real ones as far as the agent can tell:
// - `ray start --head --port=P` leaves a daemon listening on P (and fails when P is taken);
// - `ray start --address=H:P --block` fails unless H:P answers, then stays in the foreground;
// - `ray stop` ends every Ray process of the node (the daemons and the blocking workers);
// - `vllm serve ... --distributed-executor-backend ray` fails unless RAY_ADDRESS answers, then
//   runs the engine simulator with the same flags.
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processExists, repoRoot } from '@llmgw/testing';

/** One recorded invocation. */
export interface FakeCall {
  readonly cmd: 'ray' | 'vllm';
  readonly argv: readonly string[];
  readonly rayAddress?: string;
}

const COMMON = (state: string): string => `
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const STATE = ${JSON.stringify(state)};
function record(cmd) {
  const line = { cmd, argv: process.argv.slice(2), ...(process.env.RAY_ADDRESS ? { rayAddress: process.env.RAY_ADDRESS } : {}) };
  fs.appendFileSync(path.join(STATE, 'calls.jsonl'), JSON.stringify(line) + '\\n');
}
function reachable(address, done) {
  const m = /^\\[?([^\\]]+?)\\]?:(\\d+)$/.exec(address || '');
  if (!m) return done(false);
  const socket = net.connect({ host: m[1], port: Number(m[2]) });
  socket.once('connect', () => { socket.destroy(); done(true); });
  socket.once('error', () => done(false));
}
`;

const RAY = (state: string): string => `#!${process.execPath}
'use strict';
${COMMON(state)}
const { spawn } = require('node:child_process');
record('ray');
const args = process.argv.slice(2);
const flag = (name) => { const a = args.find((x) => x.startsWith(name + '=')); return a === undefined ? undefined : a.slice(name.length + 1); };
const pidFile = (pid) => path.join(STATE, 'ray-' + pid + '.pid');
if (args[0] === 'start' && args.includes('--head')) {
  // The head outlives this command (as Ray's does): a detached daemon holding the port.
  const port = Number(flag('--port'));
  const head = "const net = require('node:net'); const s = net.createServer((c) => c.end());" +
    "s.once('error', (e) => { process.send('port ' + process.argv[1] + ': ' + e.code); process.exit(1); });" +
    "s.listen({ host: '127.0.0.1', port: Number(process.argv[1]), exclusive: true }, () => process.send('ok'));" +
    "process.on('SIGTERM', () => s.close(() => process.exit(0)));";
  const child = spawn(process.execPath, ['-e', head, String(port)], { detached: true, stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
  child.once('message', (m) => {
    if (m !== 'ok') { console.error('ray head failed: ' + m); process.exit(1); }
    fs.writeFileSync(pidFile(child.pid), String(child.pid));
    console.log('ray head listening on ' + port);
    child.disconnect();
    child.unref();
    process.exit(0);
  });
} else if (args[0] === 'start' && flag('--address') !== undefined) {
  reachable(flag('--address'), (ok) => {
    if (!ok) { console.error('cannot reach the Ray head at ' + flag('--address')); process.exit(1); }
    fs.writeFileSync(pidFile(process.pid), String(process.pid));
    console.log('joined ' + flag('--address'));
    const end = () => { try { fs.unlinkSync(pidFile(process.pid)); } catch {} process.exit(0); };
    process.on('SIGTERM', end);
    setInterval(() => undefined, 1 << 30);
  });
} else if (args[0] === 'stop') {
  const pids = fs.readdirSync(STATE).filter((f) => /^ray-\\d+\\.pid$/.test(f)).map((f) => Number(f.slice(4, -4)));
  const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
  for (const pid of pids) { try { process.kill(pid, 'SIGTERM'); } catch {} }
  const deadline = Date.now() + 10000;
  const wait = () => {
    const left = pids.filter(alive);
    if (left.length === 0 || Date.now() > deadline) {
      for (const pid of pids) { try { fs.unlinkSync(pidFile(pid)); } catch {} }
      console.log('stopped ' + pids.length + ' Ray process(es)');
      process.exit(left.length === 0 ? 0 : 1);
    }
    setTimeout(wait, 50);
  };
  wait();
} else {
  console.error('fake ray: unsupported ' + args.join(' '));
  process.exit(2);
}
`;

const VLLM = (state: string, run: string, sim: string): string => `#!${process.execPath}
'use strict';
${COMMON(state)}
const { spawn } = require('node:child_process');
record('vllm');
const args = process.argv.slice(2);
const start = () => {
  const child = spawn(process.execPath, [${JSON.stringify(run)}, ${JSON.stringify(sim)}, ...args, '--engine', 'vllm'], { stdio: 'inherit' });
  process.on('SIGTERM', () => child.kill('SIGTERM'));
  child.once('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
};
if (args.includes('ray')) {
  reachable(process.env.RAY_ADDRESS, (ok) => {
    if (!ok) { console.error('cannot reach Ray at ' + process.env.RAY_ADDRESS); process.exit(1); }
    start();
  });
} else start();
`;

/** The fake executables of one node, in their own bin folder, with what they recorded. */
export class FakeRayNode {
  readonly binDir: string;
  readonly stateDir: string;

  constructor(root: string, readonly nodeId: string) {
    this.binDir = join(root, nodeId, 'bin');
    this.stateDir = join(root, nodeId, 'ray-state');
    mkdirSync(this.binDir, { recursive: true });
    mkdirSync(this.stateDir, { recursive: true });
    const repo = repoRoot();
    const write = (name: string, text: string): void => {
      const file = join(this.binDir, name);
      writeFileSync(file, text);
      chmodSync(file, 0o755);
    };
    write('ray', RAY(this.stateDir));
    write('vllm', VLLM(this.stateDir, join(repo, 'tools', 'run.cjs'), join(repo, 'tools', 'sim-engine', 'src', 'main.ts')));
  }

  /** Every call so far, oldest first. */
  calls(): FakeCall[] {
    const file = join(this.stateDir, 'calls.jsonl');
    if (!existsSync(file)) return [];
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as FakeCall);
  }

  /** Pids of the Ray processes (heads, blocking workers) of this node still alive. */
  livePids(): number[] {
    return readdirSync(this.stateDir)
      .filter((f) => /^ray-\d+\.pid$/.test(f))
      .map((f) => Number(f.slice(4, -4)))
      .filter((pid) => processExists(pid));
  }

  /** Ends what a failed test left running (by pid, only what these fakes started). */
  killAll(): void {
    for (const pid of this.livePids()) process.kill(pid, 'SIGKILL');
  }
}
