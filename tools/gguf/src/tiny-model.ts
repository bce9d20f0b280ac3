import { encodeGguf, type GgufTensor, type GgufValue } from './gguf-writer';

/** Shape of the generated model; the defaults are the ones known to load in node-llama-cpp 3.21.1. */
export interface TinyModelOptions {
  readonly embedding: number;
  readonly layers: number;
  readonly heads: number;
  readonly feedForward: number;
  readonly contextLength: number;
  readonly seed: number;
}

export const TINY_MODEL_DEFAULTS: TinyModelOptions = {
  embedding: 64,
  layers: 2,
  heads: 4,
  feedForward: 128,
  contextLength: 2048,
  seed: 42,
};

/** mulberry32: a small seeded PRNG, so the same options always give the same bytes. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The byte-level vocabulary llama.cpp needs: `<unk>`, `<s>`, `</s>`, the 256 byte tokens spelled
 * `<0xNN>`, and `▁` so spaces survive a round trip. Token types: 1 normal, 2 unknown,
 * 3 control, 6 byte.
 */
function vocabulary(): { tokens: string[]; types: number[] } {
  const tokens = ['<unk>', '<s>', '</s>'];
  const types = [2, 3, 3];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(6);
  }
  tokens.push('\u2581');
  types.push(1);
  return { tokens, types };
}

/** Builds a deterministic random-weight llama GGUF (~470 KB with the defaults). */
export function buildTinyModel(options: Partial<TinyModelOptions> = {}): Buffer {
  const o = { ...TINY_MODEL_DEFAULTS, ...options };
  const rand = mulberry32(o.seed);
  const { tokens, types } = vocabulary();
  const V = tokens.length;
  const E = o.embedding;
  const FF = o.feedForward;
  const matrix = (dims: number[], scale: number): Float32Array => {
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = (rand() * 2 - 1) * scale;
    return data;
  };
  const ones = (n: number): Float32Array => new Float32Array(n).fill(1);
  const w = 1 / Math.sqrt(E);

  const tensors: GgufTensor[] = [
    { name: 'token_embd.weight', dims: [E, V], data: matrix([E, V], 1) },
    { name: 'output_norm.weight', dims: [E], data: ones(E) },
  ];
  for (let l = 0; l < o.layers; l++) {
    const p = `blk.${l}`;
    tensors.push(
      { name: `${p}.attn_norm.weight`, dims: [E], data: ones(E) },
      { name: `${p}.attn_q.weight`, dims: [E, E], data: matrix([E, E], w) },
      { name: `${p}.attn_k.weight`, dims: [E, E], data: matrix([E, E], w) },
      { name: `${p}.attn_v.weight`, dims: [E, E], data: matrix([E, E], w) },
      { name: `${p}.attn_output.weight`, dims: [E, E], data: matrix([E, E], w) },
      { name: `${p}.ffn_norm.weight`, dims: [E], data: ones(E) },
      { name: `${p}.ffn_gate.weight`, dims: [E, FF], data: matrix([E, FF], w) },
      { name: `${p}.ffn_up.weight`, dims: [E, FF], data: matrix([E, FF], w) },
      { name: `${p}.ffn_down.weight`, dims: [FF, E], data: matrix([FF, E], 1 / Math.sqrt(FF)) },
    );
  }

  const metadata: Array<readonly [string, GgufValue]> = [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['general.name', { type: 'string', value: 'llmgw-tiny' }],
    ['general.alignment', { type: 'u32', value: 32 }],
    ['llama.context_length', { type: 'u32', value: o.contextLength }],
    ['llama.embedding_length', { type: 'u32', value: E }],
    ['llama.block_count', { type: 'u32', value: o.layers }],
    ['llama.feed_forward_length', { type: 'u32', value: FF }],
    ['llama.attention.head_count', { type: 'u32', value: o.heads }],
    ['llama.attention.head_count_kv', { type: 'u32', value: o.heads }],
    ['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: 1e-5 }],
    ['llama.rope.dimension_count', { type: 'u32', value: E / o.heads }],
    ['tokenizer.ggml.model', { type: 'string', value: 'llama' }],
    ['tokenizer.ggml.tokens', { type: 'string[]', value: tokens }],
    ['tokenizer.ggml.token_type', { type: 'i32[]', value: types }],
    ['tokenizer.ggml.scores', { type: 'f32[]', value: tokens.map(() => 0) }],
    ['tokenizer.ggml.bos_token_id', { type: 'u32', value: 1 }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: 2 }],
    ['tokenizer.ggml.unknown_token_id', { type: 'u32', value: 0 }],
    ['tokenizer.ggml.add_space_prefix', { type: 'bool', value: false }],
  ];
  return encodeGguf(metadata, tensors);
}
