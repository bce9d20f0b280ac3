import type { NodeInventory } from './discovery.service';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** Bytes in binary units with one decimal (`79.6 GiB`); whole bytes below 1 KiB. */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${UNITS[unit]}`;
}

/** Renders rows as left-aligned columns separated by two spaces. */
function table(rows: readonly (readonly string[])[]): string[] {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]))).join('  ').trimEnd());
}

/** `-` for an unknown value: absent is never printed as 0. */
function known<T>(value: T | undefined, show: (v: T) => string): string {
  return value === undefined ? '-' : show(value);
}

/** The human-readable form of an inventory (what `discover` prints without `--json`). */
export function formatInventoryTable(inv: NodeInventory): string {
  const out: string[] = [];
  out.push(`GPUs: ${inv.gpus.length} (source: ${inv.gpuSource}${inv.gpuSource === 'fake' ? ', SIMULATED' : inv.gpuSource === 'none' ? ', CPU-only node' : ''})`);
  if (inv.gpus.length > 0) {
    const rows = [['IDX', 'CLASS', 'NAME', 'MEMORY', 'USED', 'UTIL', 'TEMP', 'ECC', 'HEALTH', 'UUID']];
    for (const g of inv.gpus) {
      rows.push([
        String(g.index),
        g.gpuClass,
        g.name,
        formatBytes(g.memoryTotalBytes),
        known(g.memoryUsedBytes, formatBytes),
        known(g.utilizationPct, (v) => `${v}%`),
        known(g.temperatureC, (v) => `${v}C`),
        known(g.eccErrors, String),
        g.healthy ? 'ok' : 'UNHEALTHY',
        g.uuid,
      ]);
    }
    out.push(...table(rows).map((l) => `  ${l}`));
  }
  for (const p of inv.problems) out.push(`  problem: ${p.path}: ${p.message}`);
  out.push(`CPU: ${inv.cpuCores} cores`);
  out.push(`Memory: ${formatBytes(inv.memoryBytes)}`);
  out.push(`Cache: ${inv.cache.dir} (free ${formatBytes(inv.cache.freeBytes)} of ${formatBytes(inv.cache.totalBytes)}, ${inv.cache.entries.length} entries)`);
  if (inv.cache.entries.length > 0) {
    const rows = [['NAME', 'SIZE', 'MODIFIED']];
    for (const e of inv.cache.entries) rows.push([e.name, formatBytes(e.sizeBytes), new Date(e.modifiedAt).toISOString()]);
    out.push(...table(rows).map((l) => `  ${l}`));
  }
  const labels = Object.entries(inv.labels).map(([k, v]) => `${k}=${v}`);
  out.push(`Labels: ${labels.length > 0 ? labels.join(', ') : '-'}`);
  out.push(`Fabric: ${inv.fabric ?? '-'}`);
  return out.join('\n') + '\n';
}
