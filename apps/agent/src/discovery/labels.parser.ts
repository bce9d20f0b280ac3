import type { Problem } from '@llmgw/domain';

const LABEL_KEY = /^[A-Za-z0-9](?:[A-Za-z0-9._/-]*[A-Za-z0-9])?$/;

/**
 * Parses node labels written `key=value[,key=value...]`, e.g. `zone=eu-1,disk=nvme`.
 * Keys start and end with a letter or digit and may hold `. _ / -` inside; values are any text
 * without `,` (trimmed, may be empty). Empty entries are ignored; every malformed entry and
 * duplicate key is a problem at `path`.
 */
export function parseLabels(spec: string, path = 'labels'): { value: Readonly<Record<string, string>>; problems: Problem[] } {
  const value: Record<string, string> = {};
  const problems: Problem[] = [];
  spec.split(',').forEach((raw, i) => {
    const entry = raw.trim();
    if (entry === '') return;
    const at = entry.indexOf('=');
    const key = at < 0 ? entry : entry.slice(0, at).trim();
    const where = `${path}[${i}]`;
    if (at < 0) problems.push({ path: where, message: `"${entry}" is not key=value` });
    else if (!LABEL_KEY.test(key)) problems.push({ path: where, message: `label key "${key}" must be letters, digits and . _ / - (starting and ending with a letter or digit)` });
    else if (Object.prototype.hasOwnProperty.call(value, key)) problems.push({ path: where, message: `label "${key}" is set twice` });
    else value[key] = entry.slice(at + 1).trim();
  });
  return { value: Object.freeze(value), problems };
}
