// Paper 000's device-map search (Park & Egger, digest 000 §2.2), as a pure function of a
// per-op cost table: split points i ≤ j put ops [0, i) and [j, n) on the CPU and [i, j) on the
// GPU, whose weights and KV stream over H2D. Exhaustive enumeration; arg-min of
//   L = max(CPU(i,j), H2D(i,j,nvme), DC(i,j), S2D(nvme))            (Eq. 5, 9, 10)
//   CPU(i,j) = nb · (ΣC[0..i) + ΣC[j..n))                             (Eq. 6)
//   H2D(i,j,nvme) = ΣH[i..j) − Σ_{k∈nvme} H[k] + (nb−1)(ΣG[i..j) + KV[i..j))   (Eq. 7, 11, 14)
//   DC(i,j) = ΣD[i..j) + H[i]    when the table is compressed           (Eq. 8)
//   S2D(nvme) = Σ_{k∈nvme} S[k]                                       (Eq. 12)
//
// Decisions where the paper is silent or inconsistent:
// - Index convention: Eq. 7's half-open [i, j) everywhere; (8) and (14)'s [i..j] read as typos.
// - Multi-batch CPU term: the table holds per-batch times, so the CPU works nb times (× nb).
// - KV in Eq. 14: the H entries of the attention ops (Scores, WV) in the GPU range.
// - Tie-break ("smallest inter-stage imbalance"): smallest spread max − min over the non-zero
//   terms, then fewer CPU ops.
// - GPU time is not in Eq. 5 (single batch); the search follows the paper, the simulator adds it.

import type { OpKind, OpTimes } from '../cost/types';

export interface SplitEntry {
  /** Entry name ('Scores#3/8' for a chunk). */
  name: string;
  /** Original op name. */
  op: string;
  kind: OpKind;
  chunk?: { index: number; count: number };
  cpu: number;
  gpu: number;
  h2d: number;
  /** Part of h2d that is KV (attention ops). */
  kv: number;
  dc: number;
  s2d?: number;
}

export interface SplitOptions {
  /** Number of batches (FlexGen zig-zag), Eq. 14; 1 = single batch. */
  batches?: number;
  /** Use Eq. 8/9 (the table's h2d is the compressed transfer, dc the decompression). */
  compressed?: boolean;
  /** Enumerate NVMe subsets of the GPU range's weights (needs s2d). Eq. 10–12. */
  nvme?: boolean;
  /** Largest NVMe candidate set enumerated exhaustively (2^k subsets). Decision: 12. */
  maxNvmeWeights?: number;
}

export interface SplitTerms { cpu: number; h2d: number; dc: number; s2d: number }

export interface SplitCandidate {
  /** GPU range [i, j) over the entries. */
  i: number;
  j: number;
  /** Entry indices loaded from NVMe. */
  nvme: number[];
  terms: SplitTerms;
  L: number;
}

export interface SplitResult {
  best: SplitCandidate;
  /** Number of (i, j, nvme) candidates evaluated. */
  evaluated: number;
  /** Reference candidates for explanations: all-GPU, all-CPU, best CPU-prefix split (j = n,
   * paper 000's "single split", Fig. 14) and best split with a CPU suffix (j < n). */
  gpuOnly: SplitCandidate;
  cpuOnly: SplitCandidate;
  bestSingle?: SplitCandidate;
  bestDouble?: SplitCandidate;
}

const isAttention = (k: OpKind): boolean => k === 'scores' || k === 'wv';

/** Builds search entries from a cost table, cutting the named ops into `count` chunks each. */
export function splitEntries(ops: OpTimes[], chunked: Record<string, number> = {}): SplitEntry[] {
  const out: SplitEntry[] = [];
  for (const t of ops) {
    const base: SplitEntry = {
      name: t.name, op: t.name, kind: t.kind, cpu: t.cpu ?? t.cpuSolo ?? Infinity, gpu: t.gpu ?? 0, h2d: t.h2d ?? Infinity,
      kv: t.h2dKv ?? (isAttention(t.kind) ? t.h2d ?? 0 : 0), dc: t.dc ?? 0,
    };
    if (t.s2d !== undefined && t.s2d > 0) base.s2d = t.s2d;
    const m = chunked[t.name] ?? 1;
    if (m <= 1) { out.push(base); continue; }
    for (let c = 0; c < m; c++) {
      const e: SplitEntry = { ...base, name: `${t.name}#${c + 1}/${m}`, chunk: { index: c, count: m }, cpu: base.cpu / m, gpu: base.gpu / m, h2d: base.h2d / m, kv: base.kv / m, dc: base.dc / m };
      if (base.s2d !== undefined) e.s2d = base.s2d / m;
      out.push(e);
    }
  }
  return out;
}

function spread(t: SplitTerms): number {
  const v = [t.cpu, t.h2d, t.dc, t.s2d].filter((x) => x > 0);
  return v.length ? Math.max(...v) - Math.min(...v) : 0;
}

function better(a: SplitCandidate, b: SplitCandidate | undefined, n: number): boolean {
  if (!b) return true;
  const eps = 1e-9 * Math.max(1, Math.abs(b.L));
  if (a.L < b.L - eps) return true;
  if (a.L > b.L + eps) return false;
  const sa = spread(a.terms), sb = spread(b.terms);
  if (sa < sb - eps) return true;
  if (sa > sb + eps) return false;
  return n - (a.j - a.i) < n - (b.j - b.i);
}

/** Terms and L of one candidate (the search's inner step, exposed for checks and explanations). */
export function evaluateCandidate(entries: SplitEntry[], i: number, j: number, nvme: number[], opts: SplitOptions = {}): SplitCandidate {
  const nb = opts.batches ?? 1;
  let cpu = 0, h2d = 0, g = 0, kv = 0, d = 0, s2d = 0;
  entries.forEach((e, k) => {
    if (k < i || k >= j) { cpu += e.cpu; return; }
    h2d += e.h2d; g += e.gpu; kv += e.kv; d += e.dc;
  });
  for (const k of nvme) { const e = entries[k]!; h2d -= e.h2d; s2d += e.s2d ?? Infinity; }
  const terms: SplitTerms = {
    cpu: nb * cpu,
    h2d: Math.max(0, h2d + (nb - 1) * (g + kv)),
    dc: opts.compressed && j > i ? d + entries[i]!.h2d : 0,
    s2d,
  };
  return { i, j, nvme: [...nvme], terms, L: Math.max(terms.cpu, terms.h2d, terms.dc, terms.s2d) };
}

/** Exhaustive search over all GPU ranges [i, j) (0 ≤ i ≤ j ≤ n) and NVMe subsets. */
export function searchSplits(entries: SplitEntry[], opts: SplitOptions = {}): SplitResult {
  const n = entries.length;
  if (n === 0) throw new Error('split search: empty cost table');
  const nb = opts.batches ?? 1;
  if (!Number.isInteger(nb) || nb < 1) throw new Error(`split search: batches must be a positive integer, got ${nb}`);
  const pre = (f: (e: SplitEntry) => number): Float64Array => {
    const p = new Float64Array(n + 1);
    for (let k = 0; k < n; k++) p[k + 1] = p[k]! + f(entries[k]!);
    return p;
  };
  const C = pre((e) => e.cpu), H = pre((e) => e.h2d), G = pre((e) => e.gpu), KV = pre((e) => e.kv), D = pre((e) => e.dc);
  const sum = (p: Float64Array, a: number, b: number): number => p[b]! - p[a]!;
  let best: SplitCandidate | undefined, bestSingle: SplitCandidate | undefined, bestDouble: SplitCandidate | undefined;
  let gpuOnly: SplitCandidate | undefined, cpuOnly: SplitCandidate | undefined;
  let evaluated = 0;
  const maxK = opts.maxNvmeWeights ?? 12;
  for (let i = 0; i <= n; i++) {
    for (let j = i; j <= n; j++) {
      if (i === j && i > 0) continue; // one all-CPU candidate is enough
      const cpu = nb * (sum(C, 0, i) + sum(C, j, n));
      const h2d = sum(H, i, j) + (nb - 1) * (sum(G, i, j) + sum(KV, i, j));
      const dc = opts.compressed && j > i ? sum(D, i, j) + entries[i]!.h2d : 0;
      const nvmeable: number[] = [];
      if (opts.nvme) for (let k = i; k < j; k++) if (entries[k]!.s2d !== undefined && !isAttention(entries[k]!.kind)) nvmeable.push(k);
      const subsets = nvmeable.length <= maxK ? 1 << nvmeable.length : 1;
      for (let mask = 0; mask < subsets; mask++) {
        const nvme: number[] = [];
        let s2d = 0;
        let h = h2d;
        for (let b = 0; b < nvmeable.length; b++) {
          if (mask & (1 << b)) { const k = nvmeable[b]!; nvme.push(k); s2d += entries[k]!.s2d!; h -= entries[k]!.h2d; }
        }
        const terms: SplitTerms = { cpu, h2d: Math.max(0, h), dc, s2d };
        const c: SplitCandidate = { i, j, nvme, terms, L: Math.max(terms.cpu, terms.h2d, terms.dc, terms.s2d) };
        evaluated++;
        if (better(c, best, n)) best = c;
        if (mask === 0) {
          if (i === 0 && j === n) gpuOnly = c;
          if (i === j) cpuOnly = c;
          const single = j === n && i > 0 && i < n;
          const double = j < n && j > i;
          if (single && better(c, bestSingle, n)) bestSingle = c;
          if (double && better(c, bestDouble, n)) bestDouble = c;
        }
      }
    }
  }
  if (!best || !Number.isFinite(best.L)) {
    const missing = entries.find((e) => !Number.isFinite(e.cpu) && !Number.isFinite(e.h2d));
    throw new Error(`split search: no candidate has a finite time${missing ? ` (op ${missing.name} has neither a cpu nor an h2d time)` : ''}`);
  }
  const r: SplitResult = { best, evaluated, gpuOnly: gpuOnly!, cpuOnly: cpuOnly! };
  if (bestSingle) r.bestSingle = bestSingle;
  if (bestDouble) r.bestDouble = bestDouble;
  return r;
}
