/** Helpers the catalog validator shares: value descriptions and problem paths. */

export type Json = Record<string, unknown>;

/** True for a plain mapping (not null, not a list). */
export function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Short description of an unexpected value for error messages; long strings are cut. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  return String(value);
}

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `models[0]` + `name` → `models[0].name`; odd keys are quoted: `env["bad key"]`. */
export function child(path: string, key: string): string {
  if (!PLAIN_KEY.test(key)) return `${path}[${JSON.stringify(key)}]`;
  return path ? `${path}.${key}` : key;
}

/** `models` + 1 → `models[1]`. */
export function item(path: string, index: number): string {
  return `${path}[${index}]`;
}

/** The closest allowed key to a misspelt one, when it is close enough to be a likely typo. */
export function suggest(key: string, allowed: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const a of allowed) {
    const d = a.toLowerCase() === key.toLowerCase() ? 0 : distance(a.toLowerCase(), key.toLowerCase());
    if (d < bestDistance) {
      best = a;
      bestDistance = d;
    }
  }
  return bestDistance <= Math.max(1, Math.min(3, Math.floor(key.length / 3))) ? best : undefined;
}

function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

/** Freezes a value and everything it holds (plain objects and arrays); returns it. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
