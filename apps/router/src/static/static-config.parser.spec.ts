import { describe, expect, it } from 'vitest';
import { parseStaticConfig } from './static-config.parser';

describe('parseStaticConfig', () => {
  it('turns models and endpoints into a snapshot that resolves names and aliases without a controller', () => {
    const snapshot = parseStaticConfig(
      [
        'models:',
        '  - name: llama',
        '    aliases: [llama3, l3]',
        '    engine: vllm',
        '    firstByteTimeout: 30s',
        '    stallTimeout: 500ms',
        '  - name: tiny',
        '    metrics: { running: "llamacpp:requests_processing" }',
        '    endpoints: [embeddings]',
        '    routing: { policy: round-robin }',
        'endpoints:',
        '  - { id: r1, model: llama, url: "http://10.0.0.5:8000" }',
        '  - { model: tiny, url: "http://10.0.0.6:8080/engine/", engine: llamacpp, node: n6, suspect: true }',
      ].join('\n'),
      'router.yaml',
    );
    expect(snapshot).toEqual({
      revision: 1,
      catalog: {
        revision: 1,
        models: [
          { name: 'llama', aliases: ['llama3', 'l3'], engine: 'vllm', metrics: undefined, firstByteTimeoutMs: 30_000, stallTimeoutMs: 500 },
          { name: 'tiny', aliases: [], engine: undefined, metrics: { running: 'llamacpp:requests_processing' }, endpoints: ['embeddings'], routing: { policy: 'round-robin' } },
        ],
      },
      endpoints: [
        { replicaId: 'r1', model: 'llama', url: 'http://10.0.0.5:8000', engine: 'vllm', nodeId: '', suspect: false },
        { replicaId: 'http://10.0.0.6:8080/engine/', model: 'tiny', url: 'http://10.0.0.6:8080/engine/', engine: 'llamacpp', nodeId: 'n6', suspect: true },
      ],
    });
  });

  it('accepts JSON and an empty document', () => {
    expect(parseStaticConfig('{"models":[{"name":"m","engine":"vllm"}],"endpoints":[]}', 'r.json').catalog.models).toHaveLength(1);
    expect(parseStaticConfig('', 'empty.yaml')).toEqual({ revision: 1, catalog: { revision: 1, models: [] }, endpoints: [] });
  });

  it('names every problem by its path', () => {
    const text = [
      'models:',
      '  - { name: a, aliases: [b], engine: vllm }',
      '  - { name: b, engine: vllm, metrics: { running: "not a name" } }',
      '  - { name: c, firstByteTimeout: 30, stallTimeout: 2h, routing: { policy: prefix-affinity, prefixAffinity: { epsilon: 0 } } }',
      'endpoints:',
      '  - { id: x, model: b-alias, url: "http://h:1" }',
      '  - { id: x, model: a, url: "https://h:2" }',
      '  - { id: y, model: c, url: "not a url" }',
    ].join('\n');
    expect(() => parseStaticConfig(text, 'router.yaml')).toThrow(
      [
        'router config file router.yaml: 10 problem(s):',
        "  models[1].name: 'b' is already used by models[0].aliases[0]",
        '  models[1].metrics.running: not a metric name: "not a name"',
        '  models[2].firstByteTimeout: must be a duration such as "500ms", "30s", "5m" or "1h" (got 30)',
        '  models[2].stallTimeout: must be between 100ms and 1h (got "2h")',
        '  models[2].routing.prefixAffinity.epsilon: must be a number above 0 and at most 10 (got 0)',
        "  endpoints[0].model: 'b-alias' is not a model listed under models (by its name, not an alias)",
        '  endpoints[1].url: only http:// engine URLs are supported, got "https://h:2"',
        "  endpoints[1].id: 'x' is used twice",
        '  endpoints[2].engine: required (the model names no engine)',
        '  endpoints[2].url: not an absolute URL: "not a url"',
      ].join('\n'),
    );
  });

  it('refuses unknown fields and wrong types rather than ignoring them', () => {
    expect(() => parseStaticConfig('models:\n  - { name: a, engine: tgi }\nendpoint: []\n', 'r.yaml')).toThrow(/models\[0\]\.engine: .*\n.*endpoint/s);
    for (const endpoints of ['[]', '[images]', '[chat, chat]', 'chat']) {
      expect(() => parseStaticConfig(`models:\n  - { name: a, engine: vllm, endpoints: ${endpoints} }\n`, 'r.yaml'), endpoints).toThrow(/models\[0\]\.endpoints/);
    }
  });
});
