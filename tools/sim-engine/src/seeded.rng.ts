import type { Rng } from '@llmgw/domain';

/**
 * Deterministic 53-bit hash of a list of parts (strings or numbers), stable across runs and
 * platforms. Used to derive seeds and ids; not cryptographic.
 */
export function hashParts(...parts: readonly (string | number)[]): number {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  const mix = (code: number): void => {
    h1 = Math.imul(h1 ^ code, 2654435761);
    h2 = Math.imul(h2 ^ code, 1597334677);
  };
  for (const part of parts) {
    const s = typeof part === 'number' ? `#${part}` : part;
    for (let i = 0; i < s.length; i++) mix(s.charCodeAt(i));
    mix(0x1f); // separator, so ('ab','c') and ('a','bc') differ
  }
  return finish53(h1, h2);
}

/** Chains a parent hash with a run of 32-bit integers (token ids): the block hash of a prefix cache. */
export function hashInts(parent: number, values: ArrayLike<number>, from = 0, to = values.length): number {
  let h1 = (parent >>> 0) ^ 0x9e3779b9;
  let h2 = Math.floor(parent / 0x100000000) ^ 0x85ebca6b;
  for (let i = from; i < to; i++) {
    const v = values[i];
    h1 = Math.imul(h1 ^ v, 2654435761);
    h2 = Math.imul(h2 ^ v, 1597334677);
  }
  h1 = Math.imul(h1 ^ (to - from), 2246822507);
  return finish53(h1, h2);
}

function finish53(a: number, b: number): number {
  let h1 = a;
  let h2 = b;
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/** A seeded uniform generator in [0, 1) (splitmix32). Same seed, same sequence. */
export class SeededRng implements Rng {
  private state: number;

  constructor(seed: number) {
    this.state = (seed ^ Math.floor(seed / 0x100000000)) >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    let z = this.state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    z ^= z >>> 16;
    return (z >>> 0) / 4294967296;
  }

  /** Uniform integer in [min, max] (both inclusive). */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }
}
