// Plan: the one shared data structure. Planner, simulator, runtime, explanation and webviews all
// speak it. Plain JSON with a version, so a plan can be saved, diffed, shown and replayed.
// Schema: engine/plan/plan.schema.json. Stable fields for scripts: policy, predicted.layerMs,
// predicted.stepMs, predicted.tokensPerSecond, stages.decode.layers[i].ops[j].{name,device}.

import type { OpKind, Workload } from '../cost/types';
import type { Explanation } from './explanation';

/** Bump when a field changes meaning. */
export const PLAN_VERSION = 1;

export type PolicyName =
  | 'gpu-only' | 'cpu-only' | 'layer-split' | 'split-points' | 'kvpr' | 'lia' | 'neo' | 'apex' | 'moe-offload' | 'auto';

/** Lanes of the simulator and of predicted per-lane busy times. */
export type Lane = 'cpu' | 'gpu' | 'h2d' | 'd2h' | 'nvme';

export type Device = 'cpu' | 'gpu' | 'split';

/**
 * Where a weight lives during the stage:
 * - 'gpu': resident in VRAM for the whole run;
 * - 'pinned-host': in pinned host memory, streamed over h2d every step (pre-pinned, paper 000);
 * - 'host': pageable host memory, used in place by the CPU;
 * - 'nvme': read from NVMe straight into the GPU (GPUDirect Storage, paper 000 Eq. 10–12).
 */
export type WeightResidency = 'gpu' | 'pinned-host' | 'host' | 'nvme';

/** Predicted times of one op, ms, per lane it occupies (one decoder layer, one step). */
export interface OpPredicted {
  cpu?: number;
  gpu?: number;
  /** Host→device time for this op's weights and/or KV (or activations X for KVPR). */
  h2d?: number;
  /** Of h2d, the part that is per-sequence data (KV, X): repeated per sub-batch, never shared. */
  h2dKv?: number;
  d2h?: number;
  dc?: number;
  s2d?: number;
}

export interface OpPlan {
  name: string;
  kind: OpKind;
  device: Device;
  /** For device 'split': the fraction of the op (rows / chunks / heads) computed on the GPU. */
  gpuFraction?: number;
  /** For intra-op splits (paper 000): number of chunks and how many run on the GPU. */
  chunks?: { count: number; onGpu: number };
  /** Where this op's weight lives (absent for weightless ops). */
  weights?: WeightResidency;
  /** Which sub-batch(es) this op placement applies to (absent = all). */
  subBatch?: number;
  /**
   * MoE 'experts' op: which of the layer's experts are resident in VRAM (indices), of how many,
   * and the GPU share of the layer's expert bytes (the plan heatmap's expert-share row).
   */
  experts?: { onGpu: number[]; count: number; gpuBytesShare: number };
  /**
   * With sub-batches (PlanStage.subBatches), compute times and h2dKv are per sub-batch (the
   * simulator repeats them for each), while the weight part of h2d is paid once per layer.
   */
  predictedMs: OpPredicted;
}

/** Where one layer's KV cache lives. */
export interface KvPlacement {
  /** 'split': some requests' KV on GPU, others' on CPU (NEO/APEX) — see gpuFraction. */
  device: 'gpu' | 'cpu' | 'split';
  /** Fraction of the layer's KV tokens held on the GPU, for 'split'. */
  gpuFraction?: number;
  /**
   * KVPR (paper 001): tokens [0, recomputePrefix) are not transferred; their activations X are
   * sent instead and K,V recomputed on the GPU. Absent or 0 = no recomputation.
   */
  recomputePrefix?: number;
  /** Whether the host copy is streamed to the GPU each step (offloaded KV, GPU attention). */
  streamed?: boolean;
}

export interface LayerPlan {
  index: number;
  ops: OpPlan[];
  /** Summary residency of the layer's weights (the most common of its ops'). */
  weights: WeightResidency;
  kv: KvPlacement;
  /** Predicted wall time of this layer in this stage's step (ms), with the policy's overlap. */
  predictedMs: number;
  /** Optional order in which this layer's weights are transferred (KVPR fine-grained: K, V first). */
  weightOrder?: string[];
}

/** A sub-batch of a pipelined or multi-batch policy. */
export interface SubBatch {
  id: number;
  /** Sequences (requests) in it. */
  size: number;
  /** Free text: what the sub-batch holds, e.g. 'prefills + GPU decodes + 2 CPU decodes'. */
  role: string;
}

export interface LaneTimes { cpu: number; gpu: number; h2d: number; d2h: number; nvme: number }

export interface StagePredicted {
  /** One decoder layer (average over layers), ms. */
  layerMs: number;
  /** Whole step (all layers + LM head), ms. */
  stepMs: number;
  /** Busy time per lane for one step, ms. */
  perLane: LaneTimes;
}

export interface PlanStage {
  name: 'prefill' | 'decode';
  /** Step shape the stage was planned for (decode: the mid-generation context). */
  batch: number;
  newTokens: number;
  context: number;
  layers: LayerPlan[];
  /** LM head (+ final norm) placement. */
  head: OpPlan;
  subBatches?: SubBatch[];
  /** How lanes overlap, in words (e.g. 'CPU ops of layer k overlap H2D of layer k+1'). */
  overlap: string;
  predicted: StagePredicted;
}

export interface Predicted {
  /** Decode, one decoder layer, ms (the paper-000 L). */
  layerMs: number;
  /** Decode step, ms. */
  stepMs: number;
  /** Generated tokens per second over the decode stage (batch / step time). */
  tokensPerSecond: number;
  /** Whole prefill of the batch, ms. */
  prefillMs: number;
  /** End to end for the workload: prefill + gen steps, ms. */
  totalMs: number;
  perLane: LaneTimes;
  /** Online workloads (NEO/APEX): per-token latency and throughput at the arrival rate. */
  online?: { rate: number; throughputTokensPerS: number; perTokenLatencyMs: number };
}

export interface MemoryUse {
  /** VRAM the plan uses (weights, KV, activations, reserved). */
  gpuBytes: number;
  /** VRAM available to it. */
  gpuCapacityBytes: number;
  hostBytes: number;
  pinnedBytes: number;
  hostCapacityBytes: number;
  fits: boolean;
}

export interface Plan {
  version: typeof PLAN_VERSION;
  policy: PolicyName;
  /** For 'auto': the policy whose plan this is; otherwise equal to policy. */
  chosenPolicy: PolicyName;
  model: { name: string; family: string; nLayers: number };
  hardware: { name: string; source: 'measured' | 'preset' };
  workload: Workload;
  /** 'model' or the --costs file the plan was computed from. */
  costSource: string;
  stages: { prefill: PlanStage; decode: PlanStage };
  predicted: Predicted;
  memory: MemoryUse;
  explanation: Explanation;
  /** Policy-specific extras (e.g. split indices, recompute lengths, candidate counts). */
  details?: Record<string, unknown>;
}
