import { describe } from './spec-values';

/** Bytes per unit accepted in size strings: decimal (KB, MB, GB, TB) and binary (KiB, MiB, GiB, TiB). */
const UNITS: Readonly<Record<string, bigint>> = Object.freeze({
  B: 1n,
  KB: 10n ** 3n,
  MB: 10n ** 6n,
  GB: 10n ** 9n,
  TB: 10n ** 12n,
  KiB: 1n << 10n,
  MiB: 1n << 20n,
  GiB: 1n << 30n,
  TiB: 1n << 40n,
});

const SIZE_RE = /^(\d+)(?:\.(\d+))? ?(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$/;

export type SizeResult = { readonly ok: true; readonly bytes: number } | { readonly ok: false; readonly message: string };

/**
 * Reads a size: a whole number of bytes, or a string such as `16GB`, `15.5GiB`, `800MB`
 * (units are case-sensitive, so `Mb` is never mistaken for `MB`). Exact: decimal arithmetic in
 * BigInt, and a result that is not a whole, positive, safe-integer number of bytes is refused.
 */
export function parseSize(value: unknown): SizeResult {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value <= 0) {
      return { ok: false, message: `must be a positive whole number of bytes or a size like "16GB" (got ${value})` };
    }
    return { ok: true, bytes: value };
  }
  if (typeof value !== 'string') {
    return { ok: false, message: `must be a number of bytes or a size like "16GB", "15.5GiB" (got ${describe(value)})` };
  }
  const m = SIZE_RE.exec(value);
  if (!m) {
    return {
      ok: false,
      message: `"${value}" is not a size: use bytes or a number with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB (e.g. "16GB", "15.5GiB")`,
    };
  }
  const [, whole, frac = '', unit] = m;
  const scale = 10n ** BigInt(frac.length);
  const numerator = (BigInt(whole) * scale + BigInt(frac || '0')) * UNITS[unit];
  if (numerator % scale !== 0n) return { ok: false, message: `"${value}" is not a whole number of bytes` };
  const bytes = numerator / scale;
  if (bytes <= 0n) return { ok: false, message: `"${value}" must be greater than zero` };
  if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) return { ok: false, message: `"${value}" is too large` };
  return { ok: true, bytes: Number(bytes) };
}
