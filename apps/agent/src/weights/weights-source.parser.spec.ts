import { describe, expect, it } from 'vitest';
import { hfFileUrl, hfRepoInfoUrl, parseWeightsSource } from './weights-source.parser';

describe('parseWeightsSource', () => {
  it.each([
    ['file:///models/tiny.gguf', { kind: 'file', path: '/models/tiny.gguf' }],
    ['https://host.example/m/tiny.gguf?x=1', { kind: 'http', url: 'https://host.example/m/tiny.gguf?x=1', scheme: 'https', host: 'host.example' }],
    ['hf://acme/tiny/sub/model.gguf@v1.0', { kind: 'hf-file', repo: 'acme/tiny', file: 'sub/model.gguf', revision: 'v1.0' }],
    ['hf://acme/tiny@refs/pr/1', { kind: 'hf-repo', repo: 'acme/tiny', revision: 'refs/pr/1' }],
  ])('%s', (source, expected) => {
    expect(parseWeightsSource(source)).toEqual(expected);
  });

  it.each([
    ['file://relative/x', /absolute path/],
    ['file:///models/../etc/passwd', /\. or \.\. segments/],
    ['https://user:pw@host/x', /credentials/],
    ['hf://acme/tiny', /hf:\/\/org\/repo\[\/file\]@revision/],
    ['hf://acme/tiny/../x@main', /\. or \.\. segments|hf:\/\/org/],
    ['s3://bucket/x', /not a supported source/],
    ['https://host/x y', /spaces or control/],
  ])('refuses %s', (source, message) => {
    expect(() => parseWeightsSource(source)).toThrow(message);
  });

  it('builds Hugging Face URLs, encoding the revision and each path segment', () => {
    expect(hfFileUrl('https://huggingface.co/', 'acme/tiny', 'refs/pr/1', 'sub dir/model.gguf')).toBe('https://huggingface.co/acme/tiny/resolve/refs%2Fpr%2F1/sub%20dir/model.gguf');
    expect(hfRepoInfoUrl('http://127.0.0.1:9/', 'acme/tiny', 'main')).toBe('http://127.0.0.1:9/api/models/acme/tiny/revision/main');
  });
});
