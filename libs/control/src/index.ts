// The controller's decisions, pure: what to start, stop and move (reconcile planner), how an
// agent's report changes a replica (state fold), when a node counts as unreachable or lost
// (health policy), what routers may route to (snapshot builder) and what `gc` may remove
// (reclaim planner). The controller app holds the state, the clock and the I/O, and calls these.
export * from './node.entry';
export * from './replica.entry';
export { healthAt, type HealthWindows } from './node-health.policy';
export { foldMemberReport, type MemberReport } from './replica-state.folder';
export { byEvictionOrder, inventoryOf, planReconcile, type PlanAction, type PlanInput, type PlanTiming, type UnplaceableState } from './reconcile.planner';
export { buildCatalogView, buildEndpoints, type EndpointMemo } from './snapshot.builder';
export { gcPlan } from './reclaim.planner';
