import { hashParts } from './seeded.rng';

/**
 * The simulator's stand-in for a real tokenizer: deterministic, fast, and close enough in
 * count to a BPE tokenizer on English (about one token per word, ~4-5 characters per token
 * including spaces). Rules, applied left to right:
 * - a run of letters is cut into pieces of at most 6 characters, a run of digits into pieces
 *   of at most 3; each piece is one token;
 * - each Han, Hiragana, Katakana or Hangul character is one token;
 * - any other non-space character (punctuation, symbols, emoji) is one token;
 * - whitespace is not a token of its own: it marks the next token as "after a space" or "after
 *   a newline", which changes that token's id (so "a b" and "ab" differ).
 * Token ids are 32-bit hashes of the piece text, so equal text gives equal ids: what the prefix
 * cache hashes.
 */
export function tokenize(text: string): number[] {
  const ids: number[] = [];
  TOKEN_RE.lastIndex = 0;
  for (let m = TOKEN_RE.exec(text); m !== null; m = TOKEN_RE.exec(text)) {
    const ws = m[1];
    const lead = ws === '' ? '' : ws.includes('\n') ? '\n' : ' ';
    const word = m[2];
    if (word !== undefined) {
      const step = /^\p{N}/u.test(word) ? 3 : 6;
      const chars = Array.from(word);
      for (let i = 0; i < chars.length; i += step) {
        ids.push(tokenId((i === 0 ? lead : '') + chars.slice(i, i + step).join('')));
      }
    } else {
      ids.push(tokenId(lead + m[3]));
    }
  }
  return ids;
}

/** Number of tokens `tokenize(text)` would return. */
export function countTokens(text: string): number {
  return tokenize(text).length;
}

// 1: leading whitespace; 2: a letter/digit run (CJK excluded); 3: any other single character.
const CJK = '\\p{Script=Han}\\p{Script=Hiragana}\\p{Script=Katakana}\\p{Script=Hangul}';
const TOKEN_RE = new RegExp(`(\\s*)(?:((?:(?![${CJK}])[\\p{L}\\p{M}])+|\\p{N}+)|([^\\s]))`, 'gu');

const idCache = new Map<string, number>();
function tokenId(piece: string): number {
  let id = idCache.get(piece);
  if (id === undefined) {
    id = hashParts(piece) % 0x100000000;
    if (idCache.size < 100_000) idCache.set(piece, id);
  }
  return id;
}

/** One chat message as the OpenAI API carries it (only the fields the prompt estimate reads). */
export interface ChatMessage {
  role: string;
  content?: unknown;
  name?: string;
  tool_calls?: unknown;
  tool_call_id?: string;
}

/**
 * Renders chat messages into the prompt text the engine would see, with a fixed template:
 * `<|role|>\n{content}\n` per message, then `<|assistant|>\n`. Tools, when given, come first as
 * JSON. Text parts of array content are joined; other parts (images, audio) count as their JSON.
 * Equal leading messages give an equal leading text, so a repeated system prompt is a repeated
 * prefix.
 */
export function renderChat(messages: readonly ChatMessage[], tools?: unknown): string {
  let out = tools === undefined || tools === null ? '' : `<|tools|>\n${JSON.stringify(tools)}\n`;
  for (const m of messages) {
    out += `<|${m.role}|>\n${contentText(m.content)}`;
    if (m.tool_calls !== undefined && m.tool_calls !== null) out += JSON.stringify(m.tool_calls);
    out += '\n';
  }
  return `${out}<|assistant|>\n`;
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (content === undefined || content === null) return '';
  if (Array.isArray(content)) {
    return content
      .map((part: unknown) =>
        typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'text'
          ? String((part as { text?: unknown }).text ?? '')
          : JSON.stringify(part),
      )
      .join('');
  }
  return JSON.stringify(content);
}

const VOCABULARY = (
  'the of and to in is that it for as with was on be by this are from at or an have not which ' +
  'engine model token batch cache prefix request stream router replica node fleet latency ' +
  'queue decode prefill block memory kernel tensor layer weight signal value system answer ' +
  'quick brown fox jumps over lazy dog river stone light north green simple steady'
).split(' ');

/** The text of output token `index` for a sequence whose generator draws `r` in [0, 1). */
export function outputTokenText(index: number, r: number): string {
  const word = VOCABULARY[Math.floor(r * VOCABULARY.length) % VOCABULARY.length];
  return index === 0 ? word : ` ${word}`;
}
