// The JSON shapes `llmgw` reads: the controller's admin API, defined once in @llmgw/domain
// (re-exported here for the commands), and the catalog API's (apps/catalog, /openapi.json).
// Absent fields are unknown, never 0.
import type { ApiEndpoint, EngineKind } from '@llmgw/domain';

export type {
  EventView,
  GcCollectView,
  GcPlanView,
  GpuView,
  NodeView,
  ReplicaView,
  StatusView,
  UnplaceableView,
} from '@llmgw/domain';

/** A model as the catalog API stores it (normalised: sizes in bytes, replicas as {min, max}). */
export interface CatalogModel {
  name: string;
  aliases?: string[];
  source: string;
  size: number;
  replicas: { min: number; max: number };
  endpoints?: ApiEndpoint[];
  profiles: { engine: EngineKind; gpuClass?: string; gpusPerNode?: number; nodes?: number; args?: string[]; env?: Record<string, string>; endpoints?: ApiEndpoint[] }[];
  [key: string]: unknown;
}

/** GET /v1/catalog. */
export interface CatalogView {
  revision: number;
  models: CatalogModel[];
}

/** POST /v1/catalog/validate. */
export interface ValidationReport {
  valid: boolean;
  problems: { path: string; message: string }[];
  changes?: { added: string[]; removed: string[]; changed: string[]; currentRevision: number };
  preview?: {
    nodes: number;
    models: {
      model: string;
      wanted: number;
      existing: number;
      outcome: 'satisfied' | 'fits' | 'partial' | 'unplaceable';
      placements: { profileIndex: number; profile: string; members: { nodeId: string; gpuIndices: number[] }[] }[];
      unplaceable?: { summary: string; reasons: { profileIndex: number; nodeId?: string; reason: string }[] };
      truncated?: boolean;
    }[];
  };
}
