import { CST, Lexer } from 'yaml';
import type { Problem } from '@llmgw/domain';
import { CatalogError } from './catalog.error';

/**
 * What a catalog document (YAML or JSON) may cost to read, in one place for every reader: the
 * catalog API, the controller's file reloader and `llmgw catalog validate|apply`. A real catalog
 * nests about 7 levels deep and uses a handful of aliases; these leave ample room while keeping
 * parsing bounded (the YAML composer recurses once per level, and a document tens of thousands of
 * levels deep ran V8 out of memory).
 */
export const CATALOG_DOCUMENT_LIMITS = Object.freeze({
  /** Bytes of UTF-8 text. Parsing costs about 3 s per MiB on a small machine, all on the event loop. */
  maxBytes: 4 * 1024 * 1024,
  /** Collections inside collections, as counted by {@link scanDocumentDepth}. */
  maxDepth: 32,
  /** Alias nodes (`*name`) in the document, and also the most expansions they may cause (billion laughs). */
  maxAliases: 100,
});

export type CatalogDocumentLimit = keyof typeof CATALOG_DOCUMENT_LIMITS;

/** A document refused before parsing because it exceeds one of {@link CATALOG_DOCUMENT_LIMITS}. */
export class CatalogLimitError extends CatalogError {
  constructor(
    readonly limit: CatalogDocumentLimit,
    readonly value: number,
    what: string,
  ) {
    const problem: Problem = { path: '', message: `${what}; the limit (${limit}) is ${value}` };
    super([problem], `catalog document exceeds the ${limit} limit of ${value}`);
    this.name = 'CatalogLimitError';
  }
}

/**
 * Throws a {@link CatalogLimitError} when `text` is larger, deeper or uses more aliases than
 * {@link CATALOG_DOCUMENT_LIMITS} allow. Reads tokens only (no tree is built), and stops at the
 * first limit crossed, so a hostile document costs one linear pass at most.
 */
export function checkDocumentLimits(text: string): void {
  const { maxBytes, maxDepth, maxAliases } = CATALOG_DOCUMENT_LIMITS;
  const bytes = utf8Length(text, maxBytes);
  if (bytes > maxBytes) throw new CatalogLimitError('maxBytes', maxBytes, `the document is larger than ${maxBytes} bytes`);
  const scan = scanDocumentDepth(text, { maxDepth, maxAliases });
  if (scan.depth > maxDepth) throw new CatalogLimitError('maxDepth', maxDepth, `the document nests deeper than ${maxDepth} levels`);
  if (scan.aliases > maxAliases) throw new CatalogLimitError('maxAliases', maxAliases, `the document uses more than ${maxAliases} aliases`);
}

/** Lexer tokens that mark a state and stand for no text of the source. */
const CONTROL_TOKENS: ReadonlySet<string> = new Set(['\u0002', '\u0018', '\u001f']);

/**
 * An upper bound on how deeply the collections of a YAML (or JSON) text nest, and how many
 * aliases it uses, from the lexer's tokens alone (no tree is built). Every block indicator opens a
 * level at its column (`-` and `?` where they stand, `:` where its key began) that stays open
 * while later lines are indented further; flow collections count one per open bracket, two for a
 * sequence holding `key: value` pairs (each pair is a mapping). Text in quotes, comments and block
 * scalars is never counted. Stops early once a bound in `stopAt` is passed.
 */
export function scanDocumentDepth(text: string, stopAt: { maxDepth: number; maxAliases: number }): { depth: number; aliases: number } {
  // Block levels still open: the column each began at, and whether it is a `-` item.
  const block: { col: number; dash: boolean }[] = [];
  // Per open flow collection, the levels it counts: 1, or 2 for a sequence holding pairs.
  const flow: { seq: boolean; levels: number }[] = [];
  let flowSum = 0;
  let col = 0;
  let atLineStart = true;
  let expectContent = true;
  let contentCol = 0;
  let depth = 0;
  let aliases = 0;
  for (const token of new Lexer().lex(text)) {
    if (CONTROL_TOKENS.has(token)) continue;
    const type = CST.tokenType(token);
    const here = col;
    const lastBreak = token.lastIndexOf('\n');
    col = lastBreak < 0 ? col + token.length : token.length - lastBreak - 1;
    if (type === 'newline' || type === 'space' || type === 'comment') {
      if (type === 'newline' && flow.length === 0) atLineStart = expectContent = true;
      continue;
    }
    if (flow.length === 0) {
      if (atLineStart) {
        atLineStart = false;
        // A block scalar's text holds no collections; it ends with its last line break.
        if (type === null && lastBreak === token.length - 1 && lastBreak >= 0) {
          atLineStart = expectContent = true;
          continue;
        }
        // The line's first content closes every level begun further right, and those begun at its
        // column, except a mapping's when the line is a `-` item (a sequence inside the mapping).
        const dash = type === 'seq-item-ind';
        for (let top = block.at(-1); top !== undefined && (top.col > here || (top.col === here && (top.dash || !dash))); top = block.at(-1)) block.pop();
      }
      if (expectContent) {
        contentCol = here;
        expectContent = false;
      }
    }
    switch (type) {
      case 'flow-seq-start':
      case 'flow-map-start':
        flow.push({ seq: type === 'flow-seq-start', levels: 1 });
        flowSum += 1;
        break;
      case 'flow-seq-end':
      case 'flow-map-end':
        flowSum -= flow.pop()?.levels ?? 0;
        break;
      case 'seq-item-ind':
      case 'explicit-key-ind':
      case 'map-value-ind':
        if (flow.length === 0) {
          block.push({ col: type === 'map-value-ind' ? contentCol : here, dash: type === 'seq-item-ind' });
          if (type !== 'map-value-ind') expectContent = true;
        } else {
          // A pair directly inside a flow sequence is a mapping of its own: one more level.
          const top = flow[flow.length - 1];
          if (top.seq && top.levels === 1) {
            top.levels = 2;
            flowSum += 1;
          }
        }
        break;
      case 'alias':
        aliases++;
        break;
      default:
        // A block scalar's text ends its last line: what follows starts a new one.
        if (type === null && flow.length === 0 && lastBreak >= 0 && lastBreak === token.length - 1) atLineStart = expectContent = true;
    }
    depth = Math.max(depth, block.length + flowSum);
    if (depth > stopAt.maxDepth || aliases > stopAt.maxAliases) break;
  }
  return { depth, aliases };
}

/** UTF-8 length of `text`, or any number over `cap` once it is certainly over. */
function utf8Length(text: string, cap: number): number {
  if (text.length > cap) return text.length;
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      bytes += 4;
      i++;
    } else bytes += 3;
    if (bytes > cap) return bytes;
  }
  return bytes;
}
