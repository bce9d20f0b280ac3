/**
 * A minimal GGUF v3 writer: metadata key/values and F32 tensors, data aligned to 32 bytes.
 * Enough to produce a tiny llama-architecture model llama.cpp loads; not a general converter.
 */

/** GGUF metadata value types (the subset this writer emits). */
const enum T {
  Uint32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  Uint64 = 10,
}

export type GgufValue =
  | { type: 'u32'; value: number }
  | { type: 'i32'; value: number }
  | { type: 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'u64'; value: number }
  | { type: 'string[]'; value: readonly string[] }
  | { type: 'i32[]'; value: readonly number[] }
  | { type: 'f32[]'; value: readonly number[] };

export interface GgufTensor {
  readonly name: string;
  /** ggml order: ne0 (the fastest-moving dimension) first. */
  readonly dims: readonly number[];
  readonly data: Float32Array;
}

export const GGUF_ALIGNMENT = 32;

class ByteSink {
  private chunks: Buffer[] = [];
  length = 0;
  push(b: Buffer): void {
    this.chunks.push(b);
    this.length += b.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  str(s: string): void {
    const bytes = Buffer.from(s, 'utf8');
    this.u64(bytes.length);
    this.push(bytes);
  }
  pad(alignment: number): void {
    const rem = this.length % alignment;
    if (rem) this.push(Buffer.alloc(alignment - rem));
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.length);
  }
}

function writeValue(out: ByteSink, v: GgufValue): void {
  switch (v.type) {
    case 'u32':
      out.u32(T.Uint32);
      out.u32(v.value);
      return;
    case 'i32':
      out.u32(T.Int32);
      out.i32(v.value);
      return;
    case 'f32':
      out.u32(T.Float32);
      out.f32(v.value);
      return;
    case 'bool':
      out.u32(T.Bool);
      out.push(Buffer.from([v.value ? 1 : 0]));
      return;
    case 'string':
      out.u32(T.String);
      out.str(v.value);
      return;
    case 'u64':
      out.u32(T.Uint64);
      out.u64(v.value);
      return;
    case 'string[]':
      out.u32(T.Array);
      out.u32(T.String);
      out.u64(v.value.length);
      for (const s of v.value) out.str(s);
      return;
    case 'i32[]':
      out.u32(T.Array);
      out.u32(T.Int32);
      out.u64(v.value.length);
      for (const n of v.value) out.i32(n);
      return;
    case 'f32[]':
      out.u32(T.Array);
      out.u32(T.Float32);
      out.u64(v.value.length);
      for (const n of v.value) out.f32(n);
      return;
  }
}

/** Serialises a GGUF v3 file. Tensor element counts must match their dims. */
export function encodeGguf(metadata: ReadonlyArray<readonly [string, GgufValue]>, tensors: readonly GgufTensor[]): Buffer {
  const out = new ByteSink();
  out.push(Buffer.from('GGUF', 'ascii'));
  out.u32(3);
  out.u64(tensors.length);
  out.u64(metadata.length);
  for (const [key, value] of metadata) {
    out.str(key);
    writeValue(out, value);
  }
  let offset = 0;
  for (const t of tensors) {
    const count = t.dims.reduce((a, b) => a * b, 1);
    if (count !== t.data.length) throw new Error(`tensor ${t.name}: dims ${t.dims.join('x')} hold ${count} values, data has ${t.data.length}`);
    out.str(t.name);
    out.u32(t.dims.length);
    for (const d of t.dims) out.u64(d);
    out.u32(0); // GGML_TYPE_F32
    out.u64(offset);
    offset += Math.ceil((count * 4) / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;
  }
  out.pad(GGUF_ALIGNMENT);
  for (const t of tensors) {
    out.push(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    out.pad(GGUF_ALIGNMENT);
  }
  return out.toBuffer();
}
