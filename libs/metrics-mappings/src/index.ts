export {
  PrometheusParseError,
  escapeHelp,
  escapeLabelValue,
  formatSampleValue,
  parsePrometheusText,
  parseSampleValue,
  renderPrometheusText,
  type MetricFamily,
  type MetricSample,
  type MetricType,
} from './prometheus-text.parser';
export { defaultMapping, mappingProblems, resolveMapping } from './engine-mapping.registry';
export { parseAndRead, readLoad, wantsSlots, withSlots, type ReadLoadOptions } from './engine-load.reader';
export { MAX_SLOTS, parseLlamaSlots, SlotsParseError, type SlotsLoad } from './llama-slots.parser';
