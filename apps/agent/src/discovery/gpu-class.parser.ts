import type { Problem } from '@llmgw/domain';

/** Reported GPU name (exactly as nvidia-smi prints it) → placement class. */
export type GpuClassMap = Readonly<Record<string, string>>;

/**
 * Parses `<reported name>=<class>[;<reported name>=<class>...]`, e.g.
 * `NVIDIA H100 80GB HBM3=H100-80GB;Tesla P100-PCIE-16GB=P100`.
 * Entries are separated by `;` (names contain spaces and may contain commas); the class is what
 * follows the last `=`; whitespace around names and classes is trimmed; empty entries are
 * ignored. Every malformed entry, empty side and duplicate name is a problem at `path`.
 */
export function parseGpuClassMap(spec: string, path = 'gpuClassMap'): { value: GpuClassMap; problems: Problem[] } {
  const value: Record<string, string> = {};
  const problems: Problem[] = [];
  spec.split(';').forEach((raw, i) => {
    const entry = raw.trim();
    if (entry === '') return;
    const at = entry.lastIndexOf('=');
    const name = at < 0 ? '' : entry.slice(0, at).trim();
    const gpuClass = at < 0 ? '' : entry.slice(at + 1).trim();
    const where = `${path}[${i}]`;
    if (at < 0) problems.push({ path: where, message: `"${entry}" is not <reported name>=<class>` });
    else if (name === '') problems.push({ path: where, message: `"${entry}" has no reported name before "="` });
    else if (gpuClass === '') problems.push({ path: where, message: `"${entry}" has no class after "="` });
    else if (Object.prototype.hasOwnProperty.call(value, name)) problems.push({ path: where, message: `"${name}" is mapped twice` });
    else value[name] = gpuClass;
  });
  return { value: Object.freeze(value), problems };
}

/** The class of a reported name: its mapping when there is one, else the name itself. */
export function gpuClassMapper(map: GpuClassMap): (name: string) => string {
  return (name) => (Object.prototype.hasOwnProperty.call(map, name) ? map[name] : name);
}
