import { isAbsolute } from 'node:path';

/** A weights source the agent knows how to bring onto this node. */
export type WeightsSource =
  /** A file or directory already on the node, used in place. */
  | { readonly kind: 'file'; readonly path: string }
  /** One file at an http(s) URL. */
  | { readonly kind: 'http'; readonly url: string }
  /** One file of a Hugging Face repository at a revision. */
  | { readonly kind: 'hf-file'; readonly repo: string; readonly file: string; readonly revision: string }
  /** Every file of a Hugging Face repository at a revision (a directory). */
  | { readonly kind: 'hf-repo'; readonly repo: string; readonly revision: string };

const HF_SEGMENT = '[A-Za-z0-9][A-Za-z0-9._-]*';
const HF_RE = new RegExp(`^hf://(${HF_SEGMENT}/${HF_SEGMENT})((?:/[A-Za-z0-9._+=-]+)*)@([A-Za-z0-9][A-Za-z0-9._/-]*)$`);

/** Parses a catalog `source`; throws an Error naming the source and the accepted forms. */
export function parseWeightsSource(source: string): WeightsSource {
  const bad = (why: string): Error => new Error(`weights source ${JSON.stringify(source)} ${why}`);
  if (/[\s\0]/.test(source)) throw bad('must not contain spaces or control characters');
  if (source.startsWith('file://')) {
    const path = source.slice('file://'.length);
    if (!isAbsolute(path) || hasDotSegment(path)) throw bad('must be file:// followed by an absolute path without . or .. segments');
    return { kind: 'file', path };
  }
  if (source.startsWith('http://') || source.startsWith('https://')) {
    let url: URL;
    try {
      url = new URL(source);
    } catch {
      throw bad('is not a valid URL');
    }
    if (url.username || url.password) throw bad('must not carry credentials');
    return { kind: 'http', url: source };
  }
  if (source.startsWith('hf://')) {
    const m = HF_RE.exec(source);
    if (!m) throw bad('must be hf://org/repo[/file]@revision');
    const [, repo, filePart, revision] = m;
    const file = filePart.replace(/^\//, '');
    if (hasDotSegment(file) || hasDotSegment(revision)) throw bad('must not contain . or .. segments');
    return file === '' ? { kind: 'hf-repo', repo, revision } : { kind: 'hf-file', repo, file, revision };
  }
  throw bad('is not supported: use file:///absolute/path, http(s)://host/path or hf://org/repo[/file]@revision');
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

function hasDotSegment(path: string): boolean {
  return path.split('/').some((s) => s === '.' || s === '..');
}
