export * from './placement.types';
export { place, PlacementIndex } from './placement.index';
export { describeProfile } from './placement.planner';
export { withAllocation } from './allocation.reducer';
export { cpuReplicaLimit, hostMemoryOf } from './replica-footprint';
export { fleetCapacity } from './fleet-capacity';
export { capacityByClass, freeNodesByFabric, type ClassCapacity, type FabricCapacity } from './capacity.summary';
export { formatGb } from './bytes.format';
export { allocationsOf, planPlacements, type PlacementsPlan, type PlannedPlacement } from './placements.planner';
