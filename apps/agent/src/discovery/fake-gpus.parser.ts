import { createHash } from 'node:crypto';
import type { Gpu, Problem } from '@llmgw/domain';

/** `count` simulated GPUs of one class, each with `memoryBytes`. */
export interface FakeGpuGroup {
  readonly count: number;
  readonly gpuClass: string;
  readonly memoryBytes: number;
}

const GIB = 1024 ** 3;
const MAX_PER_GROUP = 64;
const ENTRY = /^(\d+)\s*x\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?::(\d+)GB)?$/i;

/**
 * Parses a simulated inventory `<count>x<class>[:<N>GB][,...]`, e.g. `8xH100-80GB` or
 * `2xA100-40GB,1xL4-24GB`. Memory per GPU is the explicit `:<N>GB`, else the class's own
 * `<N>GB` suffix (`H100-80GB` → 80 GiB); a class with neither is a problem. Count 1..64.
 */
export function parseFakeGpuSpec(spec: string, path = 'fakeGpus'): { value: FakeGpuGroup[]; problems: Problem[] } {
  const value: FakeGpuGroup[] = [];
  const problems: Problem[] = [];
  spec.split(',').forEach((raw, i) => {
    const entry = raw.trim();
    const where = `${path}[${i}]`;
    if (entry === '') {
      if (spec.trim() !== '') problems.push({ path: where, message: 'empty entry' });
      return;
    }
    const m = ENTRY.exec(entry);
    if (!m) {
      problems.push({ path: where, message: `"${entry}" is not <count>x<class>[:<N>GB], e.g. 8xH100-80GB` });
      return;
    }
    const count = Number(m[1]);
    const gpuClass = m[2];
    const gb = m[3] ?? /(\d+)GB$/i.exec(gpuClass)?.[1];
    if (count < 1 || count > MAX_PER_GROUP) problems.push({ path: where, message: `count ${m[1]} must be 1..${MAX_PER_GROUP}` });
    else if (gb === undefined) problems.push({ path: where, message: `no memory size for "${gpuClass}": end the class in <N>GB or add :<N>GB` });
    else if (Number(gb) <= 0) problems.push({ path: where, message: `memory ${gb}GB must be positive` });
    else value.push({ count, gpuClass, memoryBytes: Number(gb) * GIB });
  });
  return { value, problems };
}

/**
 * Expands fake groups into GPUs indexed 0..n-1 in spec order. UUIDs are deterministic: the same
 * `seed` (e.g. the node name) and spec always give the same ones, different seeds different ones.
 * Only the name (`Fake <class>`), class, memory total and health are set: nothing is measured.
 */
export function fakeGpus(groups: readonly FakeGpuGroup[], seed: string): Gpu[] {
  const gpus: Gpu[] = [];
  for (const group of groups) {
    for (let k = 0; k < group.count; k++) {
      const index = gpus.length;
      const h = createHash('sha256').update(`llmgw-fake-gpu\0${seed}\0${index}\0${group.gpuClass}`).digest('hex');
      const uuid = `GPU-${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
      gpus.push({ index, uuid, name: `Fake ${group.gpuClass}`, gpuClass: group.gpuClass, memoryTotalBytes: group.memoryBytes, healthy: true });
    }
  }
  return gpus;
}
