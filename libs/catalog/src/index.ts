export { Catalog, diffCatalogs } from './catalog';
export { CatalogError } from './catalog.error';
export {
  CATALOG_DOCUMENT_LIMITS,
  CatalogLimitError,
  checkDocumentLimits,
  scanDocumentDepth,
  type CatalogDocumentLimit,
} from './catalog-document.limits';
export { loadCatalog, parseCatalogDocument, type CatalogFormat } from './catalog-document.parser';
export {
  MAX_REPLICAS,
  validateCatalogSpec,
  type CatalogSpec,
  type MetricMappingSpec,
  type ModelSpec,
  type ProfileSpec,
  type ValidationResult,
} from './catalog-spec.validator';
export { CACHE_NAME_MAX_LENGTH, CACHE_NAME_PREFIX, cacheName, isCacheName } from './cache-name';
export { ENGINE_CAPABILITIES, checkProfileRules, modelEndpoints, needsSingleFile, profileEndpoints, type EngineCapabilities, type InvalidFields } from './engine-capabilities';
export { parseSize, type SizeResult } from './size.parser';
export {
  PROFILE_ENV_DENY,
  SOURCE_FORMS,
  envNameMatches,
  hostProblem,
  inNetwork,
  parseIp,
  parseIpNetwork,
  parseWeightsSource,
  profileEnvProblem,
  refusedAddressRange,
  type IpAddress,
  type IpNetwork,
  type SourceParse,
  type WeightsSource,
} from './source-policy';
export { parseTimeout, TIMEOUT_MAX_MS, TIMEOUT_MIN_MS, type TimeoutResult } from './timeout.parser';
export { API_KEY_NAME_RE, keyAllowsModel, parseKeyLimits, validateApiKeyPatch, validateApiKeySpec, type ApiKeyPatch, type ApiKeySpec, type KnownModel } from './api-key.validator';
export { parseRouting, type RoutingResult, type RoutingSpec } from './routing-policy.parser';
