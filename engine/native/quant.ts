// Typed access to the addon's block-format kernels (native/src/quant): quantize, dequantize and
// the vec_dot of one weight row with activations, each with an optional explicit ISA path so
// callers can compare paths; plus which ISA paths this CPU runs and which formats exist.
import { loadAddon } from './addon';

export type QuantIsa = 'scalar' | 'avx2' | 'avxvnni' | 'avx512';

export interface QuantFormat {
  typeId: number;
  name: string;
  blockSize: number;
  typeSize: number;
  /** The activation format vec_dot expects (Q8_0, Q8_1 or Q8_K). */
  vecDotType: number;
  /** False for the activation-only formats (Q8_1, Q8_K). */
  hasVecDot: boolean;
}

interface QuantAddon {
  quantize(typeId: number, src: Float32Array, isa?: QuantIsa): Uint8Array;
  dequantize(typeId: number, data: Uint8Array, n: number, isa?: QuantIsa): Float32Array;
  vecDot(typeId: number, weightRow: Uint8Array, activations: Float32Array, isa?: QuantIsa): number;
  quantIsas(): QuantIsa[];
  quantFormats(): QuantFormat[];
  quantBenchMatVec(typeId: number, rows: number, cols: number, isa: QuantIsa, reps: number): QuantTiming;
  quantPeerOpen(libraryPath: string): boolean;
  quantPeerVecDot(typeId: number, weightRow: Uint8Array, quantizedActivations: Uint8Array, n: number): number;
  quantPeerDequantize(typeId: number, data: Uint8Array, n: number): Float32Array;
  quantPeerQuantize(typeId: number, src: Float32Array): Uint8Array;
  quantPeerMatVec(typeId: number, rows: number, cols: number, reps: number): QuantTiming;
}

/** Median time of one run and the bytes it streamed. */
export interface QuantTiming {
  seconds: number;
  bytes: number;
  gbPerSecond: number;
}

function addon(): QuantAddon {
  return loadAddon<QuantAddon>();
}

/** float32 -> `typeId` blocks (src.length must be a multiple of the block size). */
export function quantize(typeId: number, src: Float32Array, isa?: QuantIsa): Uint8Array {
  return addon().quantize(typeId, src, isa);
}

/** `n` elements of `typeId` blocks -> float32. */
export function dequantize(typeId: number, data: Uint8Array, n: number, isa?: QuantIsa): Float32Array {
  return addon().dequantize(typeId, data, n, isa);
}

/**
 * Dot product of one weight row (typeId blocks) with float activations, which the addon first
 * quantizes to the format's activation type with the same ISA path (as inference does).
 */
export function vecDot(typeId: number, weightRow: Uint8Array, activations: Float32Array, isa?: QuantIsa): number {
  return addon().vecDot(typeId, weightRow, activations, isa);
}

/** ISA paths this CPU can run (as capped by FULCRUM_ISA), lowest first; always has 'scalar'. */
export function quantIsas(): QuantIsa[] {
  return addon().quantIsas();
}

export function quantFormats(): QuantFormat[] {
  return addon().quantFormats();
}

export const ALL_QUANT_ISAS: readonly QuantIsa[] = ['scalar', 'avx2', 'avxvnni', 'avx512'];

// ---- micro-benchmarks and the llama.cpp peer (native/src/bench/quant_bench.cc) ----

/**
 * One single-thread matrix-vector product (activation quantize + rows x vec_dot) of a rows x cols
 * matrix of `typeId` on the given ISA path; median over `reps` runs after one warm-up.
 */
export function benchMatVec(typeId: number, rows: number, cols: number, isa: QuantIsa, reps: number): QuantTiming {
  return addon().quantBenchMatVec(typeId, rows, cols, isa, reps);
}

/**
 * The llama.cpp CPU kernels as a peer: dlopen a ggml CPU backend library (node-llama-cpp ships
 * them as libggml-cpu-<variant>.so); the block layouts are shared, so the peer reads our bytes.
 */
export const quantPeer = {
  open(libraryPath: string): void {
    addon().quantPeerOpen(libraryPath);
  },
  /** ggml's vec_dot on a weight row and activations already quantized to the vec_dot type. */
  vecDot(typeId: number, weightRow: Uint8Array, quantizedActivations: Uint8Array, n: number): number {
    return addon().quantPeerVecDot(typeId, weightRow, quantizedActivations, n);
  },
  dequantize(typeId: number, data: Uint8Array, n: number): Float32Array {
    return addon().quantPeerDequantize(typeId, data, n);
  },
  /** ggml's reference quantizer (quantize_row_<type>_ref). */
  quantize(typeId: number, src: Float32Array): Uint8Array {
    return addon().quantPeerQuantize(typeId, src);
  },
  matVec(typeId: number, rows: number, cols: number, reps: number): QuantTiming {
    return addon().quantPeerMatVec(typeId, rows, cols, reps);
  },
};
