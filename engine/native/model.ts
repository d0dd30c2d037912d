// Typed wrapper of the addon's model and kernel exports (native/src/model/model_addon.cc,
// native/src/kernels/kernels_addon.cc). The runtime uses these types; nothing else touches the
// raw addon objects.
import { loadAddon } from './addon';

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
  arch: 'llama' | 'qwen2';
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
  /** Refuse to load above this many bytes (weights + KV + scratch); 0: MemAvailable only. */
  memoryLimitBytes?: number;
  /** Positions per KV cache page, in [8, 4096]; default 64 (native KvCache::kPageTokens). */
  kvPageTokens?: number;
}

/**
 * Accumulated time of one op of the compiled forward pass. An 'rmsnorm' or 'swiglu' op includes
 * the conversion of its output rows to the next matmuls' activation format (fused: no separate
 * 'convert' op follows it).
 */
export interface NativeOpTiming {
  kind: 'embed' | 'rmsnorm' | 'convert' | 'matmul' | 'add_bias' | 'rope' | 'store_kv' | 'attention' | 'add_residual' | 'swiglu' | 'last_rows';
  /** Decoder layer, or -1 outside the layers. */
  layer: number;
  /** Tensor name, for matmuls. */
  weight?: string;
  ns: number;
  calls: number;
}

export interface NativeModel {
  /** Logits of the last token (nVocab floats), or of every token when wantAllLogits. */
  eval(tokens: Int32Array, startPos: number, wantAllLogits?: boolean): Float32Array;
  /** Same, on a worker thread. One evaluation at a time per model. */
  evalAsync(tokens: Int32Array, startPos: number, wantAllLogits?: boolean): Promise<Float32Array>;
  /** Forget KV positions ≥ fromPos. */
  clearKv(fromPos: number): void;
  dispose(): void;
  /** Per-op timing of the forward pass since profiling was last switched on (resets the counters). */
  opProfile(): NativeOpTiming[];
  profiling: boolean;
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
  readonly disposed: boolean;
}

export interface NativeKernels {
  matmul(type: number, weights: Uint8Array, rows: number, cols: number, x: Float32Array, nTokens: number, threads: number): Float32Array;
  rmsnorm(x: Float32Array, w: Float32Array, eps: number): Float32Array;
  rope(x: Float32Array, nHeads: number, headDim: number, pos: number, nRot: number, freqBase: number, freqScale: number, neox: boolean): Float32Array;
  /** Best sustained read bandwidth in bytes/s over `reps` passes of a `bytes` buffer with `threads` threads. */
  readBandwidth(bytes: number, threads: number, reps: number): number;
  isaLevel(): 'scalar' | 'avx2' | 'avx512';
  physicalCores(): number;
}

interface ModelAddon {
  Model: new (path: string, tensors: NativeTensorEntry[], config: NativeModelConfig) => NativeModel;
  kernels: NativeKernels;
}

export function createNativeModel(path: string, tensors: NativeTensorEntry[], config: NativeModelConfig): NativeModel {
  return new (loadAddon<ModelAddon>().Model)(path, tensors, config);
}

export function nativeKernels(): NativeKernels {
  return loadAddon<ModelAddon>().kernels;
}
