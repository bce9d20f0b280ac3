// The parts of the controller admin API's JSON (apps/controller/src/admin/admin.views.ts) these
// tests read. Tools may not import apps, so the shapes are restated here, narrowly.

export interface ReplicaView {
  id: string;
  model: string;
  engine: string;
  state: string;
  reason?: string;
  members: { nodeId: string; rank: number; gpuIndices: number[]; port?: number }[];
  url?: string;
}

export interface NodeView {
  id: string;
  address: string;
  state: string;
  connected: boolean;
  gpus: { index: number; gpuClass: string }[];
  replicas: string[];
}
