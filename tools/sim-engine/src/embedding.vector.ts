import { SeededRng } from './seeded.rng';

/**
 * A deterministic unit-length embedding of a token sequence: the sum of one fixed pseudo-random
 * vector per token id (a bag of tokens), L2-normalised. Equal inputs give equal vectors and
 * inputs sharing many tokens point in similar directions. A smaller `dim` gives the normalised
 * prefix of a larger one.
 */
export function embedTokens(tokens: readonly number[], dim: number): Float32Array {
  const counts = new Map<number, number>();
  for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
  const acc = new Float64Array(dim);
  for (const [token, count] of counts) {
    const rng = new SeededRng(token * 2654435761 + 0x5bd1e995);
    for (let d = 0; d < dim; d++) acc[d] += count * (rng.next() * 2 - 1);
  }
  let norm = 0;
  for (let d = 0; d < dim; d++) norm += acc[d] * acc[d];
  norm = Math.sqrt(norm);
  const out = new Float32Array(dim);
  for (let d = 0; d < dim; d++) out[d] = norm === 0 ? 0 : acc[d] / norm;
  return out;
}

/** The base64 encoding of little-endian float32 values, as `encoding_format: "base64"` expects. */
export function toBase64(vector: Float32Array): string {
  return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64');
}
