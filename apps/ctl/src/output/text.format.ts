// Plain-text rendering for `llmgw` tables and summaries. Unknown values print as `-`, never 0.

/** Shown for a value nobody knows (absent is not zero). */
export const UNKNOWN = '-';

/** Colour helpers: real ANSI only on a terminal that allows colour, identity otherwise. */
export interface Style {
  bold(text: string): string;
  dim(text: string): string;
  red(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
}

const sgr = (code: number) => (text: string) => `\x1b[${code}m${text}\x1b[0m`;
const PLAIN: Style = { bold: (t) => t, dim: (t) => t, red: (t) => t, green: (t) => t, yellow: (t) => t };
const ANSI: Style = { bold: sgr(1), dim: sgr(2), red: sgr(31), green: sgr(32), yellow: sgr(33) };

/** ANSI colours when `colour`, plain text otherwise. */
export function styleFor(colour: boolean): Style {
  return colour ? ANSI : PLAIN;
}

/** Visible width of text that may hold ANSI colour codes. */
export function visibleWidth(text: string): number {
  return [...text.replace(/\x1b\[[0-9;]*m/g, '')].length;
}

function pad(text: string, width: number, right: boolean): string {
  const fill = ' '.repeat(Math.max(0, width - visibleWidth(text)));
  return right ? fill + text : text + fill;
}

/**
 * Columns separated by two spaces, each as wide as its widest cell; columns listed in
 * `rightAligned` (indexes) are right-aligned (numbers), the last column is never padded.
 */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[], rightAligned: readonly number[] = []): string {
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((r) => visibleWidth(r[c] ?? ''))));
  return (
    all
      .map((r) => r.map((cell, c) => (c === r.length - 1 && !rightAligned.includes(c) ? cell : pad(cell, widths[c], rightAligned.includes(c)))).join('  ').trimEnd())
      .join('\n') + '\n'
  );
}

/** Characters of a usage bar: used, unhealthy, unavailable (cordoned/unreachable), free. */
export const BAR_CHARS = { used: '#', unhealthy: '!', unavailable: '~', free: '.' } as const;

/**
 * A fixed-width bar `[####~!......]` of GPU use. Segments are proportional (largest remainder,
 * so they always fill `width`), and any non-zero segment gets at least one character when the
 * width allows: one broken card among a thousand must still show.
 */
export function usageBar(c: { used: number; unhealthy: number; unavailable: number; free: number }, width = 20): string {
  const parts = [
    ['used', c.used],
    ['unhealthy', c.unhealthy],
    ['unavailable', c.unavailable],
    ['free', c.free],
  ] as const;
  const total = parts.reduce((s, [, n]) => s + Math.max(0, n), 0);
  if (total === 0) return `[${' '.repeat(width)}]`;
  const exact = parts.map(([, n]) => (Math.max(0, n) / total) * width);
  const cells = exact.map(Math.floor);
  // Every non-zero part shows with at least one character; a part raised so has had its share.
  const raised = new Set<number>();
  parts.forEach(([, n], i) => {
    if (n > 0 && cells[i] === 0) {
      cells[i] = 1;
      raised.add(i);
    }
  });
  let left = width - cells.reduce((s, n) => s + n, 0);
  while (left < 0) {
    cells[cells.indexOf(Math.max(...cells))]--;
    left++;
  }
  // The rest by largest remainder (ties: the earlier part).
  const order = exact.map((e, i) => [e - Math.floor(e), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (const [, i] of order) {
    if (left <= 0) break;
    if (parts[i][1] > 0 && !raised.has(i)) {
      cells[i]++;
      left--;
    }
  }
  return `[${parts.map(([name], i) => BAR_CHARS[name].repeat(cells[i])).join('')}]`;
}

/** `45s`, `12m`, `3h12m`, `2d4h`: coarse, for idle times and ages. Negative clamps to 0s. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  const d = Math.floor(h / 24);
  return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
}

/** Decimal units with one decimal (`16.1 GB`); whole bytes below 1 KB; `-` when unknown. */
export function formatBytes(bytes: number | undefined): string {
  if (bytes === undefined) return UNKNOWN;
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let v = bytes;
  let u = 0;
  while (Math.abs(v) >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** A time in ms since the epoch as UTC to the second, `2026-09-17T00:52:34Z`; `-` when unknown. */
export function formatTime(ms: number | undefined): string {
  if (ms === undefined) return UNKNOWN;
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** `n thing` / `n things`. */
export function plural(n: number, thing: string, things = `${thing}s`): string {
  return `${n} ${n === 1 ? thing : things}`;
}
