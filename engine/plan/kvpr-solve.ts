// KVPR's per-layer problem (paper 001, Jiang et al.; digest 001 §2): with the KV cache in host
// memory, send the activations X[0:l] of the first l cached tokens instead of their K,V, recompute
// K,V[0:l] on the GPU while K,V[l:s] stream over PCIe, and pick l to minimise
//   t(l) = M_X/v_com + max(t_recomp, M_KV/v_com)                                   (Eq. 11)
//   M_X = b·l·h·p (6),  M_KV = 2·b·(s−l)·h_kv·p (7),  N = 4·b·l·h·h_kv FLOPs (9),  t_recomp = N/v_gpu (10)
// Generalised to GQA (h_kv = KV width); with h_kv = h these are the paper's equations.
// t is piecewise linear in l, so the optimum is at l = 0, l = s, or where the two branches of the
// max meet: l* = p·s·v_gpu / (2·h·v_com + p·v_gpu) (independent of b and of h_kv). The paper calls
// Eq. 12 a linear program; evaluating the breakpoints (rounded both ways) is its exact solution
// over integers.

export interface KvprProblem {
  /** Cached tokens per sequence (the paper's s). */
  s: number;
  b: number;
  /** Hidden size (width of X). */
  h: number;
  /** K (or V) width: nKvHeads·headDim (= h without GQA). */
  hKv: number;
  /** Bytes per element. */
  p: number;
  /** GPU FLOP/s for the recompute GEMM. */
  vGpu: number;
  /** PCIe bytes/s (one speed for X and KV, as the paper). */
  vCom: number;
}

export interface KvprTimes { l: number; xMs: number; kvMs: number; recomputeMs: number; totalMs: number }

export function kvprTimes(q: KvprProblem, l: number): KvprTimes {
  const xBytes = q.b * l * q.h * q.p;
  const kvBytes = 2 * q.b * (q.s - l) * q.hKv * q.p;
  const flops = 4 * q.b * l * q.h * q.hKv;
  const xMs = (xBytes / q.vCom) * 1e3;
  const kvMs = (kvBytes / q.vCom) * 1e3;
  const recomputeMs = (flops / q.vGpu) * 1e3;
  return { l, xMs, kvMs, recomputeMs, totalMs: xMs + Math.max(recomputeMs, kvMs) };
}

/** Continuous optimum of Eq. 11 when recomputation pays (h < 2·h_kv), else 0. */
export function kvprBreakpoint(q: KvprProblem): number {
  if (q.h >= 2 * q.hKv) return 0; // X is at least as big as K+V: sending X never helps
  return (q.p * q.s * q.vGpu) / (2 * q.h * q.vCom + q.p * q.vGpu);
}

/** Integer arg-min of Eq. 11 over 0 ≤ l ≤ s. Ties go to the smaller l (less recomputation). */
export function kvprSolve(q: KvprProblem): KvprTimes {
  for (const k of ['s', 'b', 'h', 'hKv', 'p', 'vGpu', 'vCom'] as const) {
    if (!Number.isFinite(q[k]) || q[k] < 0 || (k !== 's' && q[k] === 0)) throw new Error(`kvpr: ${k} must be a positive finite number, got ${q[k]}`);
  }
  const s = Math.floor(q.s);
  const lStar = kvprBreakpoint(q);
  const candidates = new Set([0, s, Math.floor(lStar), Math.min(s, Math.ceil(lStar))]);
  let best: KvprTimes | undefined;
  for (const l of [...candidates].sort((a, b) => a - b)) {
    const t = kvprTimes(q, l);
    if (!best || t.totalMs < best.totalMs - 1e-12) best = t;
  }
  return best!;
}
