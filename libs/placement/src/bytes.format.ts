/** Formats bytes as decimal gigabytes with one decimal, e.g. `16.0 GB` (1 GB = 10^9 bytes). */
export function formatGb(bytes: number): string {
  return `${(bytes / 1e9).toFixed(1)} GB`;
}
