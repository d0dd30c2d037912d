// LIA (paper 002) §5.1, Eqs. (2)–(9): latency of one decoder layer for an offloading vector p.
//
// Decision (digest 002 §2b "typo to resolve"): the paper states p_i = 1 → CPU, but Eqs. (5), (8)
// and (9) are printed with the opposite polarity. We use p_i = 1 → CPU throughout and apply the
// physically meaningful cases: weights/KV cross PCIe when the sublayer runs on the GPU (5), the
// GPU roofline applies on the GPU (8), and new K/V are stored back to host memory when QKV ran on
// the GPU (9). Eqs. (4), (6), (7) are XORs and need no correction.

import { LIA_SUBLAYERS, type LiaLayerShape, type LiaStage, type SublayerSize, producedKvBytes, sublayerSizes } from './sublayers';

/** The scalar throughputs of Eq. (8) and the link of Eqs. (4)–(7), (9). */
export interface LiaSystem {
  /** BW_PCIe, effective host↔device bandwidth, GB/s (1e9 B/s). */
  pcieGBps: number;
  /** BW_CPU, host memory bandwidth seen by the CPU, GB/s. */
  cpuGBps: number;
  /** BW_GPU, device memory bandwidth, GB/s. */
  gpuGBps: number;
  /** TH_CPU (TH_AMX where the host has AMX), TFLOP/s. */
  cpuTflops: number;
  /** TH_GPU, TFLOP/s. */
  gpuTflops: number;
}

/** p as a 6-bit mask: bit (i−1) is p_i; 1 = CPU, 0 = GPU. 0 = full GPU, 63 = full CPU. */
export type LiaPolicyMask = number;

export const FULL_GPU: LiaPolicyMask = 0;
export const FULL_CPU: LiaPolicyMask = 63;
/** (0,1,1,0,0,0): attention (Q·Kᵀ, S·V) on the CPU, the weight sublayers on the GPU. */
export const PARTIAL_CPU: LiaPolicyMask = 0b000110;

export function policyBit(p: LiaPolicyMask, i: number): 0 | 1 {
  return ((p >> (i - 1)) & 1) as 0 | 1;
}

/** "(0,1,1,0,0,0)" — the paper's notation. */
export function policyVector(p: LiaPolicyMask): string {
  const bits: number[] = [];
  for (let i = 1; i <= 6; i++) bits.push(policyBit(p, i));
  return `(${bits.join(',')})`;
}

export function parsePolicyVector(text: string): LiaPolicyMask {
  const m = /^\(?\s*([01])\s*,\s*([01])\s*,\s*([01])\s*,\s*([01])\s*,\s*([01])\s*,\s*([01])\s*\)?$/.exec(text);
  if (!m) throw new Error(`LIA policy vector must look like (0,1,1,0,0,0), got '${text}'`);
  let p = 0;
  for (let i = 1; i <= 6; i++) if (m[i] === '1') p |= 1 << (i - 1);
  return p;
}

/** One sublayer's terms of Eq. (2), in ms, and the lanes its transfers occupy. */
export interface SublayerTime {
  name: SublayerSize['name'];
  device: 'cpu' | 'gpu';
  loadX: number;
  loadY: number;
  loadR: number;
  comp: number;
  store: number;
  /** Of the loads, the ms that cross host→device (the rest device→host). */
  h2d: number;
  d2h: number;
  /**
   * Of loadY, the ms that can be issued before the layer starts (weights; KV in decode), i.e.
   * that the Opt-2 overlap may prefetch during the previous layer's compute.
   */
  prefetchable: number;
}

export interface LayerTime {
  policy: LiaPolicyMask;
  stage: LiaStage;
  sublayers: SublayerTime[];
  /** Eq. (2): the serial sum, ms. */
  serialMs: number;
  /** With Opt-2 (§5.2) overlap: max over the compute chain, the h2d lane and the d2h lane, ms. */
  overlappedMs: number;
  /** Busy time per lane (ms): CPU compute, GPU compute, h2d, d2h. */
  lanes: { cpu: number; gpu: number; h2d: number; d2h: number };
}

const msOf = (bytes: number, gbps: number): number => (bytes / (gbps * 1e9)) * 1e3;
const msFlops = (flops: number, tflops: number): number => (flops / (tflops * 1e12)) * 1e3;

/**
 * The ms each sublayer contributes to Eqs. (4)–(9), independent of p: where they come from
 * (Table 1 + scalar throughputs, or the shared cost model's per-op times) is the caller's choice.
 */
export interface SublayerTerms {
  name: SublayerSize['name'];
  /** D_X / BW_PCIe: the activation input crossing the link. */
  xMs: number;
  /** D_Y / BW_PCIe: weights (1, 4, 5, 6) or K/V (2, 3) crossing the link. */
  yMs: number;
  /** True when Y is a weight matrix (prefetchable by Opt-2). */
  yIsWeight: boolean;
  /** Eq. (8) on each device. */
  cpuMs: number;
  gpuMs: number;
  /** Eq. (9) D_KV / BW_PCIe: new K, V back to the host (sublayer 1 only; 0 elsewhere). */
  storeMs: number;
}

/** Table 1 sizes and the scalar throughputs of Eq. (8) as per-sublayer terms. */
export function table1Terms(shape: LiaLayerShape, sys: LiaSystem, stage: LiaStage, batch: number, length: number): SublayerTerms[] {
  const sizes = sublayerSizes(shape, stage, batch, length);
  const kvStore = msOf(producedKvBytes(shape, stage, batch, length), sys.pcieGBps);
  return sizes.map((s, i) => ({
    name: s.name,
    xMs: msOf(s.dx, sys.pcieGBps),
    yMs: msOf(s.dy, sys.pcieGBps),
    yIsWeight: s.yIsWeight,
    cpuMs: msOf(s.dx + s.dy, sys.cpuGBps) + msFlops(s.flops, sys.cpuTflops),
    gpuMs: msOf(s.dx + s.dy, sys.gpuGBps) + msFlops(s.flops, sys.gpuTflops),
    storeMs: i === 0 ? kvStore : 0,
  }));
}

/**
 * Eqs. (2)–(9) for one decoder layer. Opt-2 overlap (our model of Fig. 7, the paper gives no
 * equation): weight (and, in decode, KV) loads are prefetched during the previous layer, so they
 * only cost time when the h2d lane is the longest; activation hand-offs, prefill K/V hand-offs and
 * compute form a dependent chain; KV stores drain on the d2h lane. Layer time = the longest of
 * the three. Decisions: in steady state over many layers the per-layer pipeline fill is amortised,
 * so no fill/drain term is added; prefill's FlexGen-style mini-batches (§5.2, count unspecified)
 * are what lets the chain overlap the lanes, so their count is not modelled separately.
 */
export function evaluatePolicy(terms: readonly SublayerTerms[], stage: LiaStage, p: LiaPolicyMask): LayerTime {
  if (terms.length !== 6) throw new Error(`LIA: expected 6 sublayers, got ${terms.length}`);
  const out: SublayerTime[] = [];
  const pOf = (i: number): 0 | 1 => policyBit(p, i === 0 ? 6 : i); // p_0 = p_6
  let serial = 0;
  let chain = 0;
  const lanes = { cpu: 0, gpu: 0, h2d: 0, d2h: 0 };
  for (let i = 1; i <= 6; i++) {
    const s = terms[i - 1]!;
    const pi = pOf(i);
    const onGpu = pi === 0;
    let h2d = 0;
    let d2h = 0;
    const move = (ms: number): number => { if (onGpu) h2d += ms; else d2h += ms; return ms; };
    // (4) activation from the previous sublayer's device.
    const loadX = pi !== pOf(i - 1) ? move(s.xMs) : 0;
    // (5) weights / KV (host-resident) cross PCIe when the sublayer runs on the GPU;
    // (7) prefill K, V come from sublayer 1 and move when p_i ≠ p_1.
    let loadY = 0;
    let prefetchable = 0;
    if (stage === 'prefill' && (i === 2 || i === 3)) {
      if (pi !== pOf(1)) loadY = move(s.yMs);
    } else if (onGpu) {
      loadY = s.yMs;
      h2d += loadY;
      prefetchable = loadY;
    }
    // (6) residual inputs: sublayer 4 adds the layer input (from sublayer 1's device), sublayer 6
    // adds sublayer 4's output.
    let loadR = 0;
    if ((i === 4 && pi !== pOf(1)) || (i === 6 && pi !== pOf(4))) loadR = move(s.xMs);
    // (8) compute on the chosen device.
    const comp = onGpu ? s.gpuMs : s.cpuMs;
    // (9) new K, V go back to host memory when QKV ran on the GPU.
    const store = i === 1 && onGpu ? s.storeMs : 0;
    d2h += store;
    serial += loadX + loadY + loadR + comp + store;
    chain += loadX + loadR + comp + (loadY - prefetchable);
    if (onGpu) lanes.gpu += comp; else lanes.cpu += comp;
    lanes.h2d += h2d;
    lanes.d2h += d2h;
    out.push({ name: LIA_SUBLAYERS[i - 1]!, device: onGpu ? 'gpu' : 'cpu', loadX, loadY, loadR, comp, store, h2d, d2h, prefetchable });
  }
  const overlapped = Math.max(chain, lanes.h2d, lanes.d2h);
  return { policy: p, stage, sublayers: out, serialMs: serial, overlappedMs: overlapped, lanes };
}

/** Eqs. (2)–(9) from Table 1 and scalar throughputs. */
export function layerTime(
  shape: LiaLayerShape, sys: LiaSystem, stage: LiaStage, batch: number, length: number, p: LiaPolicyMask,
): LayerTime {
  return evaluatePolicy(table1Terms(shape, sys, stage, batch, length), stage, p);
}

/**
 * All 64 policies over given terms, cheapest first by the paper's objective (Eq. 1 over Eq. 2).
 * Decision (digest 002 §6, "whether the solver models overlap"): the ranking uses Eq. (2)'s serial
 * sum, as the paper's solver does (this is what reproduces Fig. 9's regions); the overlapped time
 * is reported alongside and is what the plan predicts.
 */
export function searchTerms(terms: readonly SublayerTerms[], stage: LiaStage): LayerTime[] {
  const all: LayerTime[] = [];
  for (let p = 0; p < 64; p++) all.push(evaluatePolicy(terms, stage, p));
  // Ties (equal serial time) break toward fewer PCIe ms (less h2d+d2h), then the lower mask.
  all.sort((a, b) => a.serialMs - b.serialMs || (a.lanes.h2d + a.lanes.d2h) - (b.lanes.h2d + b.lanes.d2h) || a.policy - b.policy);
  return all;
}

/** All 64 policies' layer times from Table 1, cheapest first (Eq. 1 over Eq. 2). */
export function searchPolicies(
  shape: LiaLayerShape, sys: LiaSystem, stage: LiaStage, batch: number, length: number,
): LayerTime[] {
  return searchTerms(table1Terms(shape, sys, stage, batch, length), stage);
}

/** Eq. (1): p_opt for one stage and (B, L). */
export function optimalPolicy(shape: LiaLayerShape, sys: LiaSystem, stage: LiaStage, batch: number, length: number): LayerTime {
  return searchPolicies(shape, sys, stage, batch, length)[0]!;
}
