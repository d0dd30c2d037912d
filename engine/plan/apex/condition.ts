// APEX (paper 004) §3.2, Eqs. (1)–(6): when does NEO's asymmetric pipelining (AP) beat GPU-only
// for decode work, and Algorithm 1's modified inequality when prefills are present.
// Data transfer is excluded, as in the paper.

export interface ApexRates {
  /** N_G, N_C: decode-attention tokens per ms on the GPU and on the CPU (same unit for both). */
  gpuTokensPerMs: number;
  cpuTokensPerMs: number;
  /** T_glinear, T_gatt: GPU linear and GPU attention time of the decode batch, one layer (ms). */
  linearMs: number;
  gpuAttnMs: number;
}

/** (1) T_gpuonly = T_glinear + T_gatt. */
export function gpuOnlyMs(r: ApexRates): number { return r.linearMs + r.gpuAttnMs; }

/** (2) T_overlap ≈ 2·T_glinear + T_gatt. */
export function overlapMs(r: ApexRates): number { return 2 * r.linearMs + r.gpuAttnMs; }

/** Left and right of (5) (decode-only) or of Algorithm 1's mixed inequality (with `cpuWindowMs`). */
export function apThroughputs(r: ApexRates, cpuWindowMs = overlapMs(r)): { ap: number; gpuOnly: number } {
  const nG = r.gpuTokensPerMs * r.gpuAttnMs; // (3)
  const nC = r.cpuTokensPerMs * cpuWindowMs; // (4), or N_C·T_overlap_with_prefill
  // Algorithm 1 keeps the denominator 2·T_glinear + T_gatt in the mixed case too, as printed.
  return { ap: (nG + nC) / overlapMs(r), gpuOnly: nG / gpuOnlyMs(r) };
}

/** (5): AP beats GPU-only for a decode-only batch. */
export function apBeatsGpuOnly(r: ApexRates): boolean {
  const t = apThroughputs(r);
  return t.ap > t.gpuOnly;
}

/** Right-hand side of (6): 2·T_glinear/T_gatt + 3 + T_gatt/T_glinear. */
export function apRatioBound(linearMs: number, gpuAttnMs: number): number {
  if (!(linearMs > 0) || !(gpuAttnMs > 0)) throw new Error(`APEX (6): T_glinear and T_gatt must be > 0 (got ${linearMs}, ${gpuAttnMs})`);
  return (2 * linearMs) / gpuAttnMs + 3 + gpuAttnMs / linearMs;
}

/** (6): N_G / N_C < 2·T_glinear/T_gatt + 3 + T_gatt/T_glinear (equivalent to (5)). */
export function apConditionHolds(r: ApexRates): boolean {
  return r.gpuTokensPerMs / r.cpuTokensPerMs < apRatioBound(r.linearMs, r.gpuAttnMs);
}

/**
 * Algorithm 1, mixed branch: the CPU window grows to T_glinear_with_prefill + T_glinear +
 * T_gatt_with_prefill (§3.4 "Mixed workload handling").
 */
export function apBeatsGpuOnlyMixed(r: ApexRates, linearWithPrefillMs: number, gpuAttnWithPrefillMs: number): boolean {
  const t = apThroughputs(r, linearWithPrefillMs + r.linearMs + gpuAttnWithPrefillMs);
  return t.ap > t.gpuOnly;
}
