// Cost-model vocabulary: the operations of a decoder layer, their work (FLOPs, bytes) for one
// step shape, their times on each device/lane, and the per-layer cost table that every policy
// plans from. The `--costs FILE` input (paper-000 style measured tables) is the same
// LayerCostTable, so a policy cannot tell modelled costs from measured ones.

/** One kind per distinct computation; `name` (below) is what users see. */
export type OpKind =
  | 'norm'        // RMSNorm / LayerNorm before attention or FFN
  | 'q' | 'k' | 'v'
  | 'rope'
  | 'scores'      // Q·Kᵀ over the KV cache
  | 'softmax'
  | 'wv'          // softmax(·)·V, "weighted values"
  | 'out'         // attention output projection
  | 'gate' | 'up' | 'down'  // SwiGLU FFN (llama/qwen2); gate·up activation fused into 'up'
  | 'fc1' | 'fc2' // OPT FFN; ReLU fused into fc1
  | 'router'      // MoE: ffn_gate_inp, token → expert scores and top-k
  | 'experts'     // MoE: the routed experts' gate/up/down (ffn_*_exps), the activated ones only
  | 'shared_expert' // MoE: ffn_*_shexp, every token
  | 'lm_head'     // model-level, once per step after the last layer
  | 'custom';     // ops read from a --costs table whose name matches no kind

/** What one step of a stage processes. */
export interface StepShape {
  /** Sequences processed together. */
  batch: number;
  /** Tokens per sequence this step (prompt length in prefill, 1 in decode). */
  newTokens: number;
  /** Tokens already in the KV cache per sequence before this step. */
  context: number;
}

/** The user's workload: what the plan is for. */
export interface Workload {
  batch: number;
  /** Prompt tokens per sequence. */
  prompt: number;
  /** Generated tokens per sequence. */
  gen: number;
  /** VRAM budget override in bytes (what-if: "as if the GPU had this much"). */
  vramBytes?: number;
  /** Online arrival rate (requests/s) for NEO/APEX-style simulation; absent = offline batch. */
  rate?: number;
  /**
   * Paper 000's number of batches (Eq. 14): `batch` is the whole batch, run as `batches` batches
   * of batch / batches sequences that share each layer's weight transfer. Absent = the planner
   * chooses (split-points searches 1, 2, 4); other policies run one batch.
   */
  batches?: number;
  /** Online workloads: requests in the serving simulation (default 64). */
  requests?: number;
}

/** Work of one op for one step shape (all sequences of the batch together). */
export interface OpWork {
  name: string;
  kind: OpKind;
  flops: number;
  /** Weight bytes read (0 for weightless ops). */
  weightBytes: number;
  /** KV-cache bytes read (scores: K; wv: V). */
  kvReadBytes: number;
  /** KV-cache bytes written (k, v: the new tokens' K or V). */
  kvWriteBytes: number;
  /** Activation bytes in and out (for the hand-off cost when neighbours run elsewhere). */
  actInBytes: number;
  actOutBytes: number;
  /** Weight format of the op's matrix ('' for weightless ops). */
  format: string;
  /** Token rows of the step (batch × new tokens): the measured correction's row bucket. */
  rows?: number;
  /**
   * Attention ops: the bytes of Scores, Softmax and WV together, which the executor runs as one
   * fused kernel, so the three share one size bucket of the measured correction.
   */
  groupBytes?: number;
}

/**
 * Times of one op on each lane, in ms. Paper 000's per-op profile: C (cpu), G (gpu),
 * H (h2d: weights and/or KV to the GPU), D (dc: GPU decompression), S (s2d: storage→device).
 * Absent = not measured / not possible.
 */
export interface OpTimes {
  name: string;
  kind: OpKind;
  /** CPU time measured/modelled while an h2d transfer runs (paper 000 profiles under contention). */
  cpu?: number;
  /** CPU time with no concurrent transfer (cpu-only, layer-split); absent → use cpu. */
  cpuSolo?: number;
  gpu?: number;
  h2d?: number;
  dc?: number;
  s2d?: number;
  /** Of h2d, the part that is KV (the rest is weights); lets policies reason about KV placement. */
  h2dKv?: number;
  /** Device→host time of what the op produces when it runs on the GPU but KV lives on the host. */
  d2h?: number;
}

/** One decoder layer's op times for one step shape, in execution order. */
export interface LayerCostTable {
  unit: 'ms';
  ops: OpTimes[];
  /** Where the numbers came from: 'model' (cost model on a profile) or the --costs file path. */
  source: string;
}

/** The `--costs FILE` JSON as users write it: `{"unit":"ms","ops":[{"name":"Q","cpu":5.775,…}]}`. */
export interface CostsFile {
  unit: 'ms';
  ops: { name: string; cpu?: number; gpu?: number; h2d?: number; dc?: number; s2d?: number }[];
}

/** Everything a policy needs about one stage's step: the work and the times. */
export interface StageCosts {
  stage: 'prefill' | 'decode';
  step: StepShape;
  work: OpWork[];
  table: LayerCostTable;
  /** LM head (and final norm) once per step. */
  head: OpTimes;
  /** Bytes of one layer's weights / KV for the whole batch at this step (for residency decisions). */
  layerWeightBytes: number;
  layerKvBytes: number;
}
