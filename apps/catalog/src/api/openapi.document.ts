import { ACCEPTED_MEDIA_TYPES } from './catalog-body.reader';
import { AUTHOR_HEADER } from './catalog-api.controller';
import { PROBLEM_KINDS, PROBLEM_TYPE_BASE } from '@llmgw/observability';

// The OpenAPI 3.1 description of llmgw-catalog, written by hand next to the controller it
// describes; a test checks that every route the app registers is listed here and vice versa.

type Json = Record<string, unknown>;

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const problem = (description: string): Json => ({ description, content: { 'application/problem+json': { schema: ref('Problem') } } });
const json = (description: string, schema: Json, headers?: Json): Json => ({
  description,
  content: { 'application/json': { schema } },
  ...(headers ? { headers } : {}),
});
const ETAG_HEADER = { ETag: { description: 'The catalog revision this answer reflects, as a strong tag: `"7"`.', schema: { type: 'string' } } };

const catalogBody = (schema: Json): Json => ({
  required: true,
  description: `A document as JSON or YAML, chosen by Content-Type (${ACCEPTED_MEDIA_TYPES.join(', ')}). UTF-8 only.`,
  content: Object.fromEntries(ACCEPTED_MEDIA_TYPES.map((type) => [type, { schema }])),
});

const ifMatch: Json = {
  name: 'If-Match',
  in: 'header',
  required: false,
  description:
    'Write only if the current revision is one of these entity tags (`"7"`, as ETag gave it) or, for `*`, if any catalog exists. Absent: unconditional. A stale tag is answered 412.',
  schema: { type: 'string' },
};
const author: Json = {
  name: AUTHOR_HEADER,
  in: 'header',
  required: false,
  description: 'Who makes this change, stored with the revision (1–128 printable ASCII characters). Default `admin`.',
  schema: { type: 'string' },
};
const modelName: Json = {
  name: 'name',
  in: 'path',
  required: true,
  description: 'The model name (URL-encoded: `a%2Fb` for `a/b`). GET also accepts an alias; PUT and DELETE need the name.',
  schema: { type: 'string' },
};
const revisionParam: Json = { name: 'revision', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } };

const writeErrors: Json = {
  '400': problem('Unparseable body (every syntax error listed), malformed If-Match or author header.'),
  '401': problem('Missing or wrong bearer token.'),
  '412': problem('If-Match does not name the current revision; `currentRevision` says which is.'),
  '413': problem('Body larger than LLMGW_CATALOG_BODY_LIMIT (at most the catalog limit maxBytes, 4MiB).'),
  '415': problem('Content-Type is neither JSON nor YAML, or not UTF-8.'),
  '422': problem(
    'The document is not a valid catalog: `problems` lists every problem with its path. Or (`document-too-complex`) it nests deeper or uses more aliases than the catalog limits allow; `limit` names the limit and its value. Nothing was stored.',
  ),
  '503': problem('The store cannot be reached.'),
};

const keyName: Json = { name: 'name', in: 'path', required: true, description: 'The key name.', schema: { type: 'string' } };
const keyErrors: Json = {
  '400': problem('Unparseable body or malformed If-Match.'),
  '401': problem('Missing or wrong bearer token.'),
  '413': problem('Body larger than LLMGW_CATALOG_BODY_LIMIT.'),
  '415': problem('Content-Type is neither JSON nor YAML, or not UTF-8.'),
  '503': problem('The store cannot be reached.'),
};

/** The OpenAPI document served at `/openapi.json`. */
export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'llmgw catalog API',
    version: '1',
    description:
      'What should run: the catalog of models and their deployment profiles, with revisions. Every write is validated by the same rules as `llmgw catalog validate`; nothing invalid is stored. The controller notices a new revision and reconciles towards it without a restart.',
  },
  security: [{ adminToken: [] }],
  paths: {
    '/v1/catalog': {
      get: {
        summary: 'The current catalog',
        description: 'Revision 0 with no models when nothing was ever stored.',
        operationId: 'getCatalog',
        responses: { '200': json('The current catalog.', ref('CatalogView'), ETAG_HEADER), '401': problem('Missing or wrong bearer token.') },
      },
      put: {
        summary: 'Replace the whole catalog',
        operationId: 'replaceCatalog',
        parameters: [ifMatch, author],
        requestBody: catalogBody(ref('CatalogDocument')),
        responses: { '200': json('Stored as a new revision.', ref('CatalogView'), ETAG_HEADER), ...writeErrors },
      },
    },
    '/v1/catalog/validate': {
      post: {
        summary: 'Dry run: every problem, or the change and a placement preview',
        description:
          'Nothing is stored. A valid document is compared with the current catalog and its missing replicas are placed on the current inventory (nodes and replicas from the store): which profile would fit where, or why not.',
        operationId: 'validateCatalog',
        requestBody: catalogBody(ref('CatalogDocument')),
        responses: {
          '200': json('The validation report (valid or not).', ref('ValidationReport')),
          '401': problem('Missing or wrong bearer token.'),
          '413': problem('Body larger than LLMGW_CATALOG_BODY_LIMIT (at most the catalog limit maxBytes, 4MiB).'),
          '415': problem('Content-Type is neither JSON nor YAML.'),
          '422': problem('The document nests deeper or uses more aliases than the catalog limits allow (`document-too-complex`); `limit` names the limit and its value.'),
        },
      },
    },
    '/v1/catalog/models/{name}': {
      parameters: [modelName],
      get: {
        summary: 'One model',
        operationId: 'getModel',
        responses: { '200': json('The model and the revision it was read from.', ref('ModelView'), ETAG_HEADER), '401': problem('Missing or wrong bearer token.'), '404': problem('No such model.') },
      },
      put: {
        summary: 'Create or replace one model',
        description:
          'Read-modify-write of the catalog that cannot lose a concurrent update: without If-Match a lost race is redone on the newer revision (409 after repeated losses); with If-Match a stale revision is 412. Problem paths are relative to the model body; problems with other models start `catalog.`.',
        operationId: 'putModel',
        parameters: [ifMatch, author],
        requestBody: catalogBody(ref('ModelDocument')),
        responses: {
          '200': json('Replaced.', ref('ModelView'), ETAG_HEADER),
          '201': json('Created.', ref('ModelView'), ETAG_HEADER),
          '409': problem('Other writers kept winning; try again.'),
          ...writeErrors,
        },
      },
      delete: {
        summary: 'Remove one model',
        description: 'Its replicas are torn down by the controller.',
        operationId: 'deleteModel',
        parameters: [ifMatch, author],
        responses: {
          '200': json('Removed; the new revision.', { type: 'object', required: ['revision', 'deleted'], properties: { revision: { type: 'integer' }, deleted: { type: 'string' } } }, ETAG_HEADER),
          '404': problem('No model by that name (an alias is named as such).'),
          '409': problem('Other writers kept winning; try again.'),
          ...writeErrors,
        },
      },
    },
    '/v1/catalog/revisions': {
      get: {
        summary: 'Stored revisions, newest first',
        operationId: 'listRevisions',
        parameters: [{ name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000, default: 50 } }],
        responses: {
          '200': json('Revisions without documents.', ref('RevisionList')),
          '400': problem('Bad limit.'),
          '401': problem('Missing or wrong bearer token.'),
        },
      },
    },
    '/v1/catalog/revisions/{revision}': {
      parameters: [revisionParam],
      get: {
        summary: "One revision's document",
        operationId: 'getRevision',
        responses: { '200': json('The stored document.', ref('RevisionView')), '401': problem('Missing or wrong bearer token.'), '404': problem('No such revision.') },
      },
    },
    '/v1/catalog/revisions/{revision}/restore': {
      parameters: [revisionParam],
      post: {
        summary: 'Store an old revision again as the newest',
        description: 'Validated again first: a document the current rules refuse is not restored (422).',
        operationId: 'restoreRevision',
        parameters: [ifMatch, author],
        responses: {
          '200': json('Restored as a new revision.', { allOf: [ref('CatalogView'), { type: 'object', properties: { restoredFrom: { type: 'integer' } } }] }, ETAG_HEADER),
          '404': problem('No such revision.'),
          ...writeErrors,
        },
      },
    },
    '/v1/keys': {
      get: { summary: 'Every API key, revoked ones included (never a secret)', operationId: 'listKeys', responses: { '200': json('The keys by name.', { type: 'object', properties: { keys: { type: 'array', items: ref('KeyView') } } }), '401': problem('Missing or wrong bearer token.') } },
      post: {
        summary: 'Create an API key',
        description: 'The secret (256 random bits, prefixed `llmgw-`) is in this answer only; the store keeps its SHA-256. Models are checked against the current catalog.',
        operationId: 'createKey',
        requestBody: catalogBody(ref('KeyDocument')),
        responses: {
          '201': json('The key and its secret.', { type: 'object', required: ['key', 'secret'], properties: { key: ref('KeyView'), secret: { type: 'string' } } }, ETAG_HEADER),
          '409': problem('A key with this name exists (revoked keys keep their names).'),
          '422': problem('The body is not a valid key: `problems` lists each problem with its path. Nothing was stored.'),
          ...keyErrors,
        },
      },
    },
    '/v1/keys/{name}': {
      parameters: [keyName],
      get: { summary: 'One API key (never its secret)', operationId: 'getKey', responses: { '200': json('The key.', ref('KeyView'), ETAG_HEADER), '401': problem('Missing or wrong bearer token.'), '404': problem('No such key.') } },
      patch: {
        summary: 'Change an API key',
        description: 'Only the fields given change; `expiresAt: null` removes the expiry. The name never changes. With If-Match (`"<revision>"`), a stale revision is 412.',
        operationId: 'updateKey',
        parameters: [ifMatch],
        requestBody: catalogBody({ type: 'object', additionalProperties: false, properties: { owner: { type: 'string' }, models: { type: 'array', items: { type: 'string' } }, limits: ref('KeyLimits'), expiresAt: { type: ['string', 'null'], format: 'date-time' } } }),
        responses: {
          '200': json('The changed key.', ref('KeyView'), ETAG_HEADER),
          '404': problem('No such key.'),
          '409': problem('The key is revoked, or changed meanwhile.'),
          '412': problem('If-Match does not name the key\'s revision; `currentRevision` says which is.'),
          '422': problem('The change is not valid: `problems` lists each problem with its path. Nothing was stored.'),
          ...keyErrors,
        },
      },
    },
    '/v1/keys/{name}/revoke': {
      parameters: [keyName],
      post: { summary: 'Revoke an API key for good', description: 'Every router refuses it within seconds. Revoking a revoked key changes nothing.', operationId: 'revokeKey', responses: { '200': json('The revoked key.', ref('KeyView'), ETAG_HEADER), '401': problem('Missing or wrong bearer token.'), '404': problem('No such key.') } },
    },
    '/v1/admin-tokens': {
      get: { summary: 'Every admin token, revoked ones included (never a secret); bootstrap token only', operationId: 'listAdminTokens', responses: { '200': json('The tokens by name.', { type: 'object', properties: { tokens: { type: 'array', items: ref('AdminTokenView') } } }), '401': problem('Missing or wrong bearer token.'), '403': problem('Not the bootstrap token.') } },
      post: {
        summary: 'Create an admin token; bootstrap token only',
        description: 'Scopes: `read` (every GET and dry run) or `write` (every change, read included). The secret (`llmgw-admin-` + 256 random bits) is in this answer only; the store keeps its SHA-256.',
        operationId: 'createAdminToken',
        requestBody: catalogBody({ type: 'object', required: ['name', 'scopes'], additionalProperties: false, properties: { name: { type: 'string' }, scopes: { type: 'array', minItems: 1, items: { type: 'string', enum: ['read', 'write'] } } } }),
        responses: {
          '201': json('The token and its secret.', { type: 'object', required: ['token', 'secret'], properties: { token: ref('AdminTokenView'), secret: { type: 'string' } } }),
          '403': problem('Not the bootstrap token.'),
          '409': problem('A token with this name exists (revoked tokens keep their names).'),
          '422': problem('The body is not a valid token: `problems` lists each problem.'),
          ...keyErrors,
        },
      },
    },
    '/v1/admin-tokens/{name}/revoke': {
      parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
      post: { summary: 'Revoke an admin token for good; bootstrap token only', operationId: 'revokeAdminToken', responses: { '200': json('The revoked token.', ref('AdminTokenView')), '401': problem('Missing or wrong bearer token.'), '403': problem('Not the bootstrap token.'), '404': problem('No such token.') } },
    },
    '/v1/usage': {
      get: {
        summary: 'Requests and tokens per API key, model and UTC hour',
        description: 'What routers reported, as the controller stored it. Read scope.',
        operationId: 'getUsage',
        parameters: [
          { name: 'since', in: 'query', required: false, description: 'A duration back from now (`30m`, `24h`, `7d`; at most 400d) or an RFC 3339 time. Default `24h`.', schema: { type: 'string' } },
          { name: 'key', in: 'query', required: false, description: 'One key name.', schema: { type: 'string' } },
        ],
        responses: { '200': json('Rows per hour and totals per key.', ref('UsageView')), '400': problem('since or key is malformed.'), '401': problem('Missing or wrong bearer token.') },
      },
    },
    '/openapi.json': { get: { summary: 'This document', operationId: 'openapi', security: [], responses: { '200': { description: 'OpenAPI 3.1 JSON.' } } } },
    '/docs': { get: { summary: 'This API as a readable page', operationId: 'docs', security: [], responses: { '200': { description: 'HTML.' } } } },
    '/healthz': { get: { summary: 'Liveness', operationId: 'healthz', security: [], responses: { '200': { description: '`{"status":"ok"}` while the process serves.' } } } },
    '/readyz': {
      get: { summary: 'Readiness (store reachable)', operationId: 'readyz', security: [], responses: { '200': { description: 'Ready.' }, '503': { description: 'Not ready, with the failing checks.' } } },
    },
    '/metrics': { get: { summary: 'Prometheus metrics', operationId: 'metrics', security: [], responses: { '200': { description: 'Prometheus text format.' } } } },
  },
  components: {
    securitySchemes: { adminToken: { type: 'http', scheme: 'bearer', description: 'LLMGW_CATALOG_ADMIN_TOKEN of the server.' } },
    schemas: {
      CatalogDocument: {
        type: 'object',
        required: ['models'],
        additionalProperties: false,
        properties: { models: { type: 'array', items: ref('ModelDocument') } },
        description: 'The catalog document, as `llmgw catalog validate` checks it (see deploy/catalog.sample.yaml). Unknown keys are errors.',
      },
      ModelDocument: {
        type: 'object',
        required: ['name', 'source', 'size', 'replicas', 'profiles'],
        additionalProperties: false,
        properties: {
          name: { type: 'string', description: 'What clients put in `model`: letters, digits and `._:/-`, at most 128.' },
          aliases: { type: 'array', items: { type: 'string' } },
          source: { type: 'string', description: '`file:///abs/path`, `http(s)://…` or `hf://org/repo[/file]@revision`.' },
          size: { oneOf: [{ type: 'integer', minimum: 1 }, { type: 'string', examples: ['16GB', '15.5GiB'] }] },
          sha256: { type: 'string', pattern: '^[0-9a-fA-F]{64}$' },
          replicas: { oneOf: [{ type: 'integer', minimum: 0 }, { type: 'object', required: ['min', 'max'], properties: { min: { type: 'integer' }, max: { type: 'integer' } } }] },
          metrics: { type: 'object', properties: { running: { type: 'string' }, waiting: { type: 'string' }, kvUsage: { type: 'array', items: { type: 'string' } }, modelLabel: { type: 'string' } } },
          endpoints: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', enum: ['chat', 'completions', 'embeddings'] }, description: 'The OpenAI endpoints the model serves; absent: those every profile serves.' },
          firstByteTimeout: { type: 'string', pattern: '^\\d+(ms|s|m|h)$', examples: ['30s'], description: "Deadline for a replica's first response byte (100ms to 1h); past it the router tries another replica. Absent = the router's LLMGW_ROUTER_FIRST_BYTE_TIMEOUT." },
          stallTimeout: { type: 'string', pattern: '^\\d+(ms|s|m|h)$', examples: ['20s'], description: "Deadline for silence between tokens of a response (100ms to 1h); past it the stream ends with an error event. Absent = the router's LLMGW_ROUTER_IDLE_TIMEOUT." },
          routing: {
            type: 'object',
            required: ['policy'],
            additionalProperties: false,
            description: 'How routers choose among the replicas. Absent: prefix-affinity for chat and completions, least-load for embeddings.',
            properties: {
              policy: { type: 'string', enum: ['least-load', 'prefix-affinity', 'round-robin'] },
              prefixAffinity: {
                type: 'object',
                additionalProperties: false,
                description: 'Only with policy prefix-affinity; each field absent = its default.',
                properties: {
                  blockChars: { type: 'integer', minimum: 16, maximum: 65536, description: 'Characters per hashed block (default 256).' },
                  maxBlocks: { type: 'integer', minimum: 1, maximum: 1024, description: 'Most blocks of the prompt hashed per request (default 32).' },
                  epsilon: { type: 'number', exclusiveMinimum: 0, maximum: 10, description: 'Load slack: a replica at or above ⌈(1 + ε) × mean load⌉ is passed over (default 0.25).' },
                },
              },
            },
          },
          profiles: { type: 'array', minItems: 1, items: ref('ProfileDocument') },
        },
      },
      ProfileDocument: {
        type: 'object',
        required: ['engine'],
        additionalProperties: false,
        properties: {
          engine: { type: 'string', enum: ['vllm', 'llamacpp'] },
          gpuClass: { type: 'string', description: 'Absent: runs on CPU (llamacpp only).' },
          gpusPerNode: { type: 'integer' },
          nodes: { type: 'integer' },
          tensorParallel: { type: 'integer' },
          pipelineParallel: { type: 'integer' },
          memoryPerGpu: { oneOf: [{ type: 'integer' }, { type: 'string' }] },
          memory: { oneOf: [{ type: 'integer' }, { type: 'string' }] },
          contextLength: { type: 'integer' },
          parallel: { type: 'integer' },
          args: { type: 'array', items: { type: 'string' } },
          env: { type: 'object', additionalProperties: { type: 'string' } },
          endpoints: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', enum: ['chat', 'completions', 'embeddings'] }, description: 'The OpenAI endpoints this profile serves; absent: derived from engine and args (llamacpp `--embeddings`: embeddings only; vllm `--task embed`/`--runner pooling`/`--convert embed`: embeddings only; else chat and completions).' },
        },
      },
      CatalogView: {
        type: 'object',
        required: ['revision', 'models'],
        properties: { revision: { type: 'integer', minimum: 0 }, models: { type: 'array', items: ref('ModelDocument') } },
        description: 'Models as stored: normalised (sizes in bytes, replicas as {min, max}, defaults filled).',
      },
      ModelView: { type: 'object', required: ['revision', 'model'], properties: { revision: { type: 'integer' }, model: ref('ModelDocument') } },
      RevisionList: {
        type: 'object',
        required: ['currentRevision', 'revisions'],
        properties: {
          currentRevision: { type: 'integer' },
          revisions: {
            type: 'array',
            items: {
              type: 'object',
              required: ['revision', 'author', 'createdAt', 'current'],
              properties: { revision: { type: 'integer' }, author: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' }, current: { type: 'boolean' } },
            },
          },
        },
      },
      RevisionView: {
        allOf: [ref('CatalogView'), { type: 'object', properties: { author: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' } } }],
      },
      ValidationReport: {
        type: 'object',
        required: ['valid', 'problems'],
        properties: {
          valid: { type: 'boolean' },
          problems: { type: 'array', items: ref('InputProblem') },
          changes: {
            type: 'object',
            properties: {
              added: { type: 'array', items: { type: 'string' } },
              removed: { type: 'array', items: { type: 'string' } },
              changed: { type: 'array', items: { type: 'string' } },
              currentRevision: { type: 'integer' },
            },
          },
          preview: {
            type: 'object',
            properties: {
              nodes: { type: 'integer' },
              models: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['model', 'wanted', 'existing', 'outcome', 'placements'],
                  properties: {
                    model: { type: 'string' },
                    wanted: { type: 'integer' },
                    existing: { type: 'integer' },
                    outcome: { type: 'string', enum: ['satisfied', 'fits', 'partial', 'unplaceable'] },
                    placements: {
                      type: 'array',
                      items: {
                        type: 'object',
                        properties: {
                          profileIndex: { type: 'integer' },
                          profile: { type: 'string' },
                          members: { type: 'array', items: { type: 'object', properties: { nodeId: { type: 'string' }, gpuIndices: { type: 'array', items: { type: 'integer' } } } } },
                        },
                      },
                    },
                    unplaceable: {
                      type: 'object',
                      properties: {
                        summary: { type: 'string' },
                        reasons: { type: 'array', items: { type: 'object', properties: { profileIndex: { type: 'integer' }, nodeId: { type: 'string' }, reason: { type: 'string' } } } },
                      },
                    },
                    truncated: { type: 'boolean' },
                  },
                },
              },
            },
          },
        },
      },
      KeyLimits: {
        type: 'object',
        additionalProperties: false,
        description: 'Each limit is for the whole router fleet, however many routers there are. Absent: no limit.',
        properties: {
          requestsPerMinute: { type: 'integer', minimum: 1 },
          tokensPerMinute: { type: 'integer', minimum: 1, description: "Prompt + completion tokens in any 60 s; a request reserves its max_tokens and an estimate of its prompt at admission." },
          concurrentRequests: { type: 'integer', minimum: 1 },
          tokensPerDay: { type: 'integer', minimum: 1, description: 'Per UTC day.' },
        },
      },
      KeyDocument: {
        type: 'object',
        required: ['name', 'owner', 'models'],
        additionalProperties: false,
        properties: {
          name: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$' },
          owner: { type: 'string', description: 'The owner or team (1–128 printable ASCII).' },
          models: { type: 'array', minItems: 1, maxItems: 100, items: { type: 'string' }, description: 'Model names or aliases in the catalog; `*` is every model, `prefix*` every model so named.' },
          limits: ref('KeyLimits'),
          expiresAt: { type: 'string', format: 'date-time', description: 'When the key stops working; in the future.' },
        },
      },
      KeyView: {
        type: 'object',
        required: ['name', 'owner', 'models', 'limits', 'state', 'createdAt', 'updatedAt', 'revision'],
        properties: {
          name: { type: 'string' },
          owner: { type: 'string' },
          models: { type: 'array', items: { type: 'string' } },
          limits: ref('KeyLimits'),
          state: { type: 'string', enum: ['active', 'expired', 'revoked'] },
          expiresAt: { type: 'string', format: 'date-time' },
          createdAt: { type: 'string', format: 'date-time' },
          updatedAt: { type: 'string', format: 'date-time' },
          revokedAt: { type: 'string', format: 'date-time' },
          revision: { type: 'integer', minimum: 1 },
        },
      },
      AdminTokenView: {
        type: 'object',
        required: ['name', 'scopes', 'createdAt'],
        properties: { name: { type: 'string' }, scopes: { type: 'array', items: { type: 'string', enum: ['read', 'write'] } }, createdAt: { type: 'string', format: 'date-time' }, revokedAt: { type: 'string', format: 'date-time' } },
      },
      UsageView: {
        type: 'object',
        required: ['since', 'rows', 'totals'],
        properties: {
          since: { type: 'string', format: 'date-time' },
          rows: {
            type: 'array',
            items: { type: 'object', properties: { key: { type: 'string' }, model: { type: 'string' }, hour: { type: 'string', format: 'date-time' }, requests: { type: 'integer' }, promptTokens: { type: 'integer' }, completionTokens: { type: 'integer' } } },
          },
          totals: { type: 'array', items: { type: 'object', properties: { key: { type: 'string' }, requests: { type: 'integer' }, promptTokens: { type: 'integer' }, completionTokens: { type: 'integer' } } } },
        },
      },
      InputProblem: { type: 'object', required: ['path', 'message'], properties: { path: { type: 'string' }, message: { type: 'string' } } },
      Problem: {
        type: 'object',
        required: ['type', 'title', 'status', 'detail', 'problems'],
        description: `RFC 9457 problem details. \`type\` is ${PROBLEM_TYPE_BASE}<kind>, kinds: ${Object.keys(PROBLEM_KINDS).join(', ')}.`,
        properties: {
          type: { type: 'string', format: 'uri' },
          title: { type: 'string' },
          status: { type: 'integer' },
          detail: { type: 'string' },
          problems: { type: 'array', items: ref('InputProblem') },
          currentRevision: { type: 'integer', description: 'On 409/412: the revision that is current.' },
          errorId: { type: 'string', description: 'On 500: the id logged with the error.' },
          limit: {
            type: 'object',
            description: 'On 413/422 for a document limit: its name (maxBytes, maxDepth, maxAliases) and value.',
            required: ['name', 'value'],
            properties: { name: { type: 'string' }, value: { type: 'integer' } },
          },
        },
      },
    },
  },
} as const;
