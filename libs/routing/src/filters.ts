import type { Candidate, PickRequest } from './candidate';

/** Narrows the candidate list; never reorders it. */
export interface Filter {
  readonly name: string;
  apply(request: PickRequest, candidates: readonly Candidate[]): readonly Candidate[];
}

/** Keeps endpoints that serve the requested (canonical) model. */
export const servesModelFilter: Filter = {
  name: 'serves-model',
  apply: (req, cs) => cs.filter((c) => c.models.includes(req.model)),
};

/** Drops endpoints whose breaker is open, and half-open ones whose single probe is taken. */
export const breakerFilter: Filter = {
  name: 'breaker',
  apply: (_req, cs) => cs.filter((c) => c.breaker === 'closed' || (c.breaker === 'half-open' && c.probeAvailable)),
};

/** Drops endpoints being drained: their in-flight requests finish, new ones go elsewhere. */
export const notDrainingFilter: Filter = {
  name: 'not-draining',
  apply: (_req, cs) => cs.filter((c) => !c.draining),
};

/**
 * Drops endpoints whose scrapes have failed too often in a row (frozen or gone engines), but
 * only when at least one other endpoint remains: a /metrics path that alone stopped answering
 * must not turn into an outage of the model, and the first-byte deadline bounds what a last
 * resort costs.
 */
export const scrapeAvailableFilter: Filter = {
  name: 'scrape-available',
  apply: (_req, cs) => {
    const available = cs.filter((c) => c.scrapeHealth !== 'unavailable');
    return available.length > 0 ? available : cs;
  },
};

/** Drops endpoints on suspect nodes, but only when at least one non-suspect endpoint remains. */
export const preferHealthyNodeFilter: Filter = {
  name: 'prefer-healthy-node',
  apply: (_req, cs) => {
    const healthy = cs.filter((c) => !c.suspect);
    return healthy.length > 0 ? healthy : cs;
  },
};

/** The default filter chain, in order. */
export const DEFAULT_FILTERS: readonly Filter[] = [servesModelFilter, breakerFilter, notDrainingFilter, scrapeAvailableFilter, preferHealthyNodeFilter];
