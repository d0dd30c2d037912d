// Typed wrapper of the addon's model and kernel exports (native/src/model/model_addon.cc,
// native/src/kernels/kernels_addon.cc). The runtime uses these types; nothing else touches the
// raw addon objects.
import { loadAddon } from './addon';
import { nativeOpTable } from './op-table';
import type { ModelArchitecture } from './architectures';

/** One tensor of the GGUF file as the native side needs it. */
export interface NativeTensorEntry {
  name: string;
  /** ggml type id. */
  type: number;
  /** Innermost first, as GGUF stores them. */
  dims: number[];
  /** Absolute byte offset of the tensor's data in the file. */
  offset: number;
}

export interface NativeModelConfig {
  arch: ModelArchitecture;
  nLayers: number;
  nEmbd: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  nFf: number;
  nVocab: number;
  /** KV cache positions. */
  contextLength: number;
  /** Most tokens per forward step; longer inputs are split natively. Default 512. */
  batchSize?: number;
  threads?: number;
  normEps: number;
  ropeFreqBase: number;
  /** 1 / linear scaling factor. */
  ropeFreqScale: number;
  ropeStyle: 'normal' | 'neox';
  /** Rotated dimensions per head. */
  nRot: number;
  /** MoE (qwen3moe): experts per layer and per token; nFf is then one expert's FFN size. */
  nExpert?: number;
  nExpertUsed?: number;
  /** Gemma 2/3: attention scale (absent: 1/sqrt(headDim)), score and final-logit soft-capping. */
  attnScale?: number;
  attnSoftcap?: number;
  finalSoftcap?: number;
  /** Sliding-window attention: the window, which layers use it, and their RoPE base. */
  slidingWindow?: number;
  swaLayers?: boolean[];
  ropeFreqBaseSwa?: number;
  /** Refuse to load above this many bytes (weights + KV + scratch); 0: MemAvailable only. */
  memoryLimitBytes?: number;
  /** Positions per KV cache page, in [8, 4096]; default 64 (native KvCache::kPageTokens). */
  kvPageTokens?: number;
  /** The KV cache's element format (engine/runtime/types.ts ExecutionOptions.kvFormat); default 'F16'. */
  kvFormat?: 'F16' | 'Q8_0';
  /** Sequences with their own KV that one step may carry (evalBatch); default 1. */
  maxSequences?: number;
}

/**
 * Accumulated time of one op of the compiled forward pass. An 'rmsnorm' or 'swiglu' op includes
 * the conversion of its output rows to the next matmuls' activation format (fused: no separate
 * 'convert' op follows it).
 */
export interface NativeOpTiming {
  /** One of the op table's kinds (engine/native/op-table.ts). */
  kind: string;
  /** Decoder layer, or -1 outside the layers. */
  layer: number;
  /** Tensor name, for matmuls. */
  weight?: string;
  ns: number;
  calls: number;
}

/** Where an op's buffers live: host memory (the CPU) or the model's accelerator. */
export type NativeLoc = 'host' | 'device';
/** A plan op of one decoder layer (the addon's op table, engine/native/op-table.ts: 'attn_norm', 'Q', …, 'Attention', …, 'Down'). */
export type NativePlanOp = string;
/** The plan's ops of one decoder layer, as the addon's op table names them. */
export function nativePlanOps(): readonly NativePlanOp[] {
  return nativeOpTable().planOps.map((o) => o.name);
}

export interface NativeOpPlacement {
  loc: NativeLoc;
  /** Matmuls on the device: the fraction of output rows computed there; the rest run on the CPU at the same time. Default 1. */
  deviceFraction?: number;
  /** For ops on the device: weights resident in device memory or streamed layer by layer from host memory. */
  weights?: 'host' | 'resident' | 'streamed';
}

export interface NativeLayerPlacement {
  ops: Partial<Record<NativePlanOp, NativeOpPlacement>>;
  /** Where the layer's KV lives; host KV with attention on the device is streamed to it every step. */
  kv: NativeLoc;
  /** KVPR: with streamed KV, positions [0, n) are recomputed on the device from stored activations instead of copied. */
  recomputePrefix?: number;
  /**
   * NEO / APEX: the KV lives where each sequence says (setSequenceKv); attention runs on the
   * device for device-KV sequences and on the CPU for host-KV ones, at the same time. Needs
   * attention placed on the device.
   */
  kvBySequence?: boolean;
}

/** One sequence of a multi-sequence step. */
export interface NativeSeqInput {
  seq: number;
  tokens: Int32Array;
  startPos: number;
  /** Keep the sequence's positions after this input's (a shifted chunk of reused KV waits there) instead of rewinding to it. */
  keepAfter?: boolean;
  /**
   * APEX's asynchronous overlap: run only this decoder layer of the one token at `startPos`
   * (native Model::SeqInput::layer). Layer 0 starts the token, each next layer continues from the
   * residual the sequence kept; only the last layer's call returns logits (the others an empty
   * array) and advances the sequence. Where the row's attention at its last layer runs on the
   * host, a call that does not finish the token defers that attention (APEX's window,
   * `deferredAttention`): the next call joins it before that layer's output projection.
   */
  layer?: number;
  /** How many layers from `layer` (default 1): the rest of a token (to the last layer) finishes it. */
  layers?: number;
}

export interface NativePlacement {
  layers: NativeLayerPlacement[];
  head: NativeOpPlacement;
}

export interface NativeLoopbackDevice {
  kind: 'loopback';
  /** The arena's capacity: the device memory budget, enforced. */
  capacityBytes: number;
  /** Link bandwidth cap (0: uncapped memcpy). */
  linkBytesPerSecond?: number;
  linkLatencySeconds?: number;
  /** Kernel threads of the device's worker pool. */
  threads?: number;
}

export interface NativeVulkanDevice {
  kind: 'vulkan';
  /** The VRAM budget Fulcrum enforces (0 or absent: the driver's, VK_EXT_memory_budget else heap × 0.8). */
  capacityBytes?: number;
}

export type NativeDevice = NativeLoopbackDevice | NativeVulkanDevice;

export interface NativeDeviceStats {
  name: string;
  capacityBytes: number;
  bytesInUse: number;
  peakBytes: number;
}

/** One op of the compiled op list. */
/** The placement prompt steps run under, and from how many rows a step is one. */
export interface NativePrefillPlacement {
  placement: NativePlacement;
  rows: number;
}

export interface NativeCompiledOp {
  /**
   * Which op list the op belongs to: the decode placement's, the prefill placement's, the
   * pipelined one (NEO's two sub-batches, compiled from the decode placement when a step first
   * uses it; see `pipelined`), or the layer-by-layer one (the decode placement with each layer's
   * edges for rows that run one layer, compiled when a step first has one; NativeSeqInput.layer).
   * compiledOps lists them in that order.
   */
  stage: 'decode' | 'prefill' | 'pipelined' | 'layer-by-layer';
  /** A pipelined op's sub-batch: 0 the rows whose KV is on the device, 1 those whose KV is on the host (absent: all rows). */
  batch?: 0 | 1;
  kind: string;
  lane: 'cpu' | 'device' | 'h2d' | 'd2h';
  /**
   * The executor's dependencies: per lane (cpu, device, h2d, d2h) the last op of that lane, by
   * index within this op's own list (its stage), that must end before this one starts; -1 none.
   * Ops of one lane also run in list order.
   */
  deps: readonly [number, number, number, number];
  layer: number;
  /** The plan op it serves ('LM head' / 'embed' outside the layers). */
  planOp: string;
  weight?: string;
  loc: NativeLoc;
  /**
   * A host matmul that, in a one-row step, also computes the next `gemvGroup` ops (matmuls of the
   * same input: a layer's K and V after Q, up after gate) in one pool run; those then do nothing
   * themselves. Profiles and traces split the pass's measured time across its ops by their weight
   * bytes (their own times are not separable). FULCRUM_NO_GEMV_GROUPS=1 turns grouping off.
   */
  gemvGroup?: number;
}

export interface NativeDeviceInfo {
  name: string;
  description: string;
  emulated: boolean;
  capacityBytes: number;
  threads: number;
  formats: string[];
  ops: string[];
  /** KV cache formats its attention kernels read (KvFormat names, e.g. ['F16']). */
  kvFormats: string[];
}

export interface NativeModel {
  /**
   * Executes on `device` with `placement` (null, null: the CPU only). Throws with `deviceError`
   * set when the device refuses the memory; the model is then back on the CPU. Forgets the KV cache.
   */
  /**
   * Places the model (null: the CPU alone). `prefill`: a second placement for steps of at least
   * `rows` rows (prompt chunks); it shares the decode placement's KV and attention.
   */
  setPlacement(placement: NativePlacement | null, device: NativeDevice | null, prefill?: NativePrefillPlacement): void;
  /** [step, op, startNs, endNs] per executed op since tracing was switched on or last taken. */
  takeTrace(): Float64Array;
  compiledOps(): NativeCompiledOp[];
  /** What setPlacement changed in the placement and why (e.g. a weight format the device has no kernel for). */
  placementNotes(): string[];
  /** Test hook: the device is lost after `n` more operations. */
  failDeviceAfter(n: number): void;
  readonly deviceStats: NativeDeviceStats | null;
  tracing: boolean;
  /**
   * Logits of the last token (nVocab floats), or of every token when wantAllLogits. `out`: the
   * caller's array of exactly that many floats, filled and returned: a decode loop that passes the
   * same array every token allocates nothing for its logits (a new array's pages fault in again
   * each time: ~0.2 ms a token measured for a 32k vocabulary, growing with the vocabulary).
   */
  eval(tokens: Int32Array, startPos: number, wantAllLogits?: boolean, out?: Float32Array): Float32Array;
  /** Same, on a worker thread. One evaluation at a time per model. `out` is written when it resolves. */
  evalAsync(tokens: Int32Array, startPos: number, wantAllLogits?: boolean, out?: Float32Array): Promise<Float32Array>;
  /** Forget KV positions ≥ fromPos (of sequence `seq`, default 0). */
  clearKv(fromPos: number, seq?: number): void;
  /**
   * Commits the host memory of sequence `seq`'s KV (default 0) for positions [0, positions),
   * clamped to the context, before an evaluation writes them (its first hold would); holds nothing.
   * kvBytesReserved counts it.
   */
  prepareKv(positions: number, seq?: number): void;
  /**
   * Moves KV positions [from, to) of sequence `seq` by `delta`, re-rotating the keys; its held
   * positions then reach at least to + delta. Host KV only: throws for KV on a device or KVPR.
   */
  shiftKv(from: number, to: number, delta: number, seq?: number): void;
  /**
   * Several sequences at their own positions in the same steps; each input's logits (last, or
   * all; empty for a layer-by-layer call before the last layer). `outs`: per input the caller's
   * array to fill (as eval's `out`) or undefined.
   */
  evalBatch(inputs: NativeSeqInput[], wantAllLogits?: boolean, outs?: (Float32Array | undefined)[]): Float32Array[];
  evalBatchAsync(inputs: NativeSeqInput[], wantAllLogits?: boolean, outs?: (Float32Array | undefined)[]): Promise<Float32Array[]>;
  /** Where a sequence keeps its KV in layers placed by sequence; forgets its KV. */
  setSequenceKv(seq: number, loc: NativeLoc): void;
  /** Moves a sequence's KV (layers placed by sequence) to `loc`, keeping its positions (NEO's swap); throws with deviceError when the device is full. */
  swapSequenceKv(seq: number, loc: NativeLoc): void;
  /** Positions held in the KV of sequence `seq`. */
  sequencePast(seq: number): number;
  readonly maxSequences: number;
  dispose(): void;
  /** Per-op timing of the forward pass since profiling was last switched on (resets the counters). */
  opProfile(): NativeOpTiming[];
  profiling: boolean;
  /**
   * NEO's asymmetric pipeline: while true, a step carrying both device-KV and host-KV sequences
   * (layers placed by sequence) runs its two sub-batches as a pipeline, the CPU attending for the
   * host-KV rows while the device runs the device-KV rows' linear ops. Same bits as one step.
   */
  pipelined: boolean;
  /**
   * Layer-by-layer steps (NativeSeqInput.layer: APEX's asynchronous overlap) are compiled for the
   * placement: set by setPlacement for a placement by sequence that allows them (not streamed KV,
   * whose staging slots serve every row of a layer's step). On Vulkan the rows' X is copied to
   * the host at each layer edge and back.
   */
  readonly layerSteps: boolean;
  /**
   * APEX's window (NativeSeqInput.layer): layer-by-layer rows whose attention runs on the host
   * defer it to the next call for the token, which joins it before that layer's output
   * projection. Attentions deferred since load, the ns they ran on the window's thread, and the
   * ns joins waited for them (0 when each was done before it was needed).
   */
  readonly deferredAttention: { started: number; runNs: number; waitNs: number };
  threads: number;
  readonly nPast: number;
  readonly contextLength: number;
  /** KV cache bytes of the whole context (what the load-time memory check counts). */
  readonly kvBytes: number;
  /** Bytes of the KV cache pages holding positions now (whole pages, every layer). */
  readonly kvBytesInUse: number;
  /** Bytes of every KV cache page allocated so far, free ones included (pages are reused, never returned). */
  readonly kvBytesReserved: number;
  /** Positions per KV cache page. */
  readonly kvPageTokens: number;
  /** The KV cache's element format. */
  readonly kvFormat: 'F16' | 'Q8_0';
  readonly disposed: boolean;
}

export interface NativeKernels {
  matmul(type: number, weights: Uint8Array, rows: number, cols: number, x: Float32Array, nTokens: number, threads: number): Float32Array;
  rmsnorm(x: Float32Array, w: Float32Array, eps: number): Float32Array;
  rope(x: Float32Array, nHeads: number, headDim: number, pos: number, nRot: number, freqBase: number, freqScale: number, neox: boolean): Float32Array;
  /** Greedy sampling's pick: the index of the largest value, the first on ties; -1 when any value is NaN or ±Inf. */
  argmaxFinite(x: Float32Array): number;
  isaLevel(): 'scalar' | 'avx2' | 'avxvnni' | 'avx512';
  /** Whether the packed decode GEMVs prefetch weights in software or leave it to the CPU (chosen per CPU, FULCRUM_GEMV_PREFETCH overrides). */
  gemvPrefetch(): 'software' | 'hardware';
  /** Whether this process's prefill of the 16-row groups (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K) runs on AMX-INT8 tiles (an AMX CPU at avx512; FULCRUM_AMX=0 turns it off). */
  amxInt8(): boolean;
  /** The same for the Q6_K decode GEMV, which on AVX-512 has its own per-CPU choice (FULCRUM_GEMV_PREFETCH_Q6_K overrides). */
  gemvPrefetchQ6K(level?: 'scalar' | 'avx2' | 'avxvnni' | 'avx512'): 'software' | 'hardware';
  /** The same for the Q5_0 decode GEMV, which at AVX-512 on Zen 4 prefetches in software where the others do not (FULCRUM_GEMV_PREFETCH_Q5_0 overrides). */
  gemvPrefetchQ5_0(): 'software' | 'hardware';
  /** How many streams the software-prefetched decode GEMVs of the 32-element formats read: 4, or 1 for the kernel's own walk (chosen per CPU, FULCRUM_GEMV_STREAMS=1|4 overrides). */
  gemvStreams(): 1 | 4;
  /** How many streams the software-prefetched Q4_K / Q5_K decode GEMVs read: 2 (Intel CPUs), or 1, their own walk (FULCRUM_GEMV_K_STREAMS=1|2 overrides). */
  gemvStreamsK(): 1 | 2;
  physicalCores(): number;
}

interface ModelAddon {
  Model: new (path: string, tensors: NativeTensorEntry[], config: NativeModelConfig) => NativeModel;
  kernels: NativeKernels;
  listDevices(): { found: NativeDeviceInfo[]; unavailable: string[] };
}

/** The devices this addon can open here, and why each other one cannot be. */
export function listNativeDevices(): { found: NativeDeviceInfo[]; unavailable: string[] } {
  return loadAddon<ModelAddon>().listDevices();
}

export function createNativeModel(path: string, tensors: NativeTensorEntry[], config: NativeModelConfig): NativeModel {
  return new (loadAddon<ModelAddon>().Model)(path, tensors, config);
}

export function nativeKernels(): NativeKernels {
  return loadAddon<ModelAddon>().kernels;
}
