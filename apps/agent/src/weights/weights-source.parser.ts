import { parseWeightsSource as parseSource, type WeightsSource } from '@llmgw/catalog';

export type { WeightsSource };

/** Parses a catalog `source` by the catalog's rules (libs/catalog source-policy); throws an Error naming the source and the problem. */
export function parseWeightsSource(source: string): WeightsSource {
  const parsed = parseSource(source);
  if (!parsed.ok) throw new Error(`weights source ${JSON.stringify(source)} ${parsed.reason}`);
  return parsed.source;
}

/** `<endpoint>/<org>/<repo>/resolve/<revision>/<file>` (Hugging Face's download URL for one file). */
export function hfFileUrl(endpoint: string, repo: string, revision: string, file: string): string {
  return `${trimSlash(endpoint)}/${repo}/resolve/${encodeURIComponent(revision)}/${file.split('/').map(encodeURIComponent).join('/')}`;
}

/** `<endpoint>/api/models/<org>/<repo>/revision/<revision>` (the repository's file list). */
export function hfRepoInfoUrl(endpoint: string, repo: string, revision: string): string {
  return `${trimSlash(endpoint)}/api/models/${repo}/revision/${encodeURIComponent(revision)}`;
}

function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
