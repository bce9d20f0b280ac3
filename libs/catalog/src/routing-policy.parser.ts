import { ROUTING_POLICIES, type ModelRouting, type PrefixAffinityParams, type Problem, type RoutingPolicyName } from '@llmgw/domain';
import { describe, isRecord } from './spec-values';

/** A model's `routing` as written in a catalog document or a router's static configuration. */
export interface RoutingSpec {
  policy: RoutingPolicyName;
  /** Only with `policy: prefix-affinity`; each field optional (absent = the default). */
  prefixAffinity?: Partial<PrefixAffinityParams>;
}

export type RoutingResult = { readonly ok: true; readonly routing: ModelRouting } | { readonly ok: false; readonly problems: Problem[] };

const ROUTING_KEYS = ['policy', 'prefixAffinity'];
const PREFIX_AFFINITY_KEYS = ['blockChars', 'maxBlocks', 'epsilon'];


/**
 * Validates a model's `routing` (at `path`, e.g. `models[0].routing`), listing every problem:
 * `policy` one of ROUTING_POLICIES; `prefixAffinity` only with `prefix-affinity`, its
 * `blockChars` an integer from 16 to 65536 (characters per block), `maxBlocks` an integer from
 * 1 to 1024 (blocks hashed per request), `epsilon` a number above 0 and at most 10 (load slack).
 * Bad values are refused, never replaced by defaults.
 */
export function parseRouting(raw: unknown, path: string): RoutingResult {
  const problems: Problem[] = [];
  if (!isRecord(raw)) return { ok: false, problems: [{ path, message: `must be a mapping with a policy (got ${describe(raw)})` }] };
  for (const k of Object.keys(raw)) if (!ROUTING_KEYS.includes(k)) problems.push({ path: `${path}.${k}`, message: `unknown field (known: ${ROUTING_KEYS.join(', ')})` });
  const policy = raw.policy;
  if (!(ROUTING_POLICIES as readonly unknown[]).includes(policy)) {
    problems.push({ path: `${path}.policy`, message: `must be one of ${ROUTING_POLICIES.join(', ')} (got ${describe(policy)})` });
  }
  const pa = raw.prefixAffinity;
  const paPath = `${path}.prefixAffinity`;
  const params: Partial<Record<keyof PrefixAffinityParams, number>> = {};
  if (pa !== undefined) {
    if (policy !== 'prefix-affinity') problems.push({ path: paPath, message: `only with policy prefix-affinity (got policy ${describe(policy)})` });
    if (!isRecord(pa)) {
      problems.push({ path: paPath, message: `must be a mapping (got ${describe(pa)})` });
    } else {
      for (const k of Object.keys(pa)) if (!PREFIX_AFFINITY_KEYS.includes(k)) problems.push({ path: `${paPath}.${k}`, message: `unknown field (known: ${PREFIX_AFFINITY_KEYS.join(', ')})` });
      const intIn = (name: 'blockChars' | 'maxBlocks', min: number, max: number): void => {
        const v = pa[name];
        if (v === undefined) return;
        if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) params[name] = v;
        else problems.push({ path: `${paPath}.${name}`, message: `must be an integer from ${min} to ${max} (got ${describe(v)})` });
      };
      intIn('blockChars', 16, 65_536);
      intIn('maxBlocks', 1, 1024);
      const e = pa.epsilon;
      if (e !== undefined) {
        if (typeof e === 'number' && Number.isFinite(e) && e > 0 && e <= 10) params.epsilon = e;
        else problems.push({ path: `${paPath}.epsilon`, message: `must be a number above 0 and at most 10 (got ${describe(e)})` });
      }
    }
  }
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, routing: { policy: policy as RoutingPolicyName, ...(pa !== undefined ? { prefixAffinity: params } : {}) } };
}
