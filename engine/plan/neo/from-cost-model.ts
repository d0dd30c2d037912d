// OnlineCosts from the shared cost model (engine/cost), so NEO/APEX plan on the same per-op costs
// as every other policy. The schedulers then see grid-profiled predictors of these functions;
// the simulator's "truth" is a finer profile of the same functions (bounded memory: the cost
// model caches every step shape it is asked about).

import type { OpKind } from '../../cost/types';
import { formatBytesPerElement, kvBytesPerToken, modelWeightBytes } from '../../model/shape';
import type { PlanContext } from '../policy';
import { workspaceBytes } from '../build';
import type { OnlineCosts } from './costs';
import { LinearPredictor, geometricGrid } from './interp';

const ATTENTION: ReadonlySet<OpKind> = new Set<OpKind>(['scores', 'softmax', 'wv']);

export interface CostModelOnlineOptions {
  /** Activation budget per iteration (default 2048 tokens, SwiftLLM-like). */
  maxBatchTokens?: number;
  /** Share of the plan's host memory for the CPU KV cache (default 0.6). */
  cpuKvShare?: number;
}

/** Weights + workspace: what NEO needs on the GPU before any KV (all weights stay resident). */
export function neoGpuFixedBytes(ctx: PlanContext): number {
  return modelWeightBytes(ctx.model) + workspaceBytes(ctx);
}

export function costModelOnlineCosts(ctx: PlanContext, opt: CostModelOnlineOptions = {}): OnlineCosts {
  const link = ctx.hardware.link;
  if (!ctx.hardware.gpu || !link) throw new Error(`online costs: hardware '${ctx.hardware.name}' has no GPU/link`);
  const m = ctx.model;
  // 'prefill' stage so a measured --costs decode table (fixed step) does not stand in for every size.
  const table = (newTokens: number, context: number) => ctx.cost.layerTimes({ batch: 1, newTokens, context }, 'prefill').ops;
  const sumOf = (newTokens: number, context: number, attention: boolean, lane: 'gpu' | 'cpu'): number => {
    let s = 0;
    for (const o of table(newTokens, context)) {
      if (ATTENTION.has(o.kind) !== attention) continue;
      s += lane === 'gpu' ? (o.gpu ?? 0) : (o.cpuSolo ?? o.cpu ?? 0);
    }
    return s;
  };
  const kvDim = m.nKvHeads * m.headDim;
  const qDim = m.nHeads * m.headDim;
  const kvPerTok = kvBytesPerToken(m);
  const maxTokens = opt.maxBatchTokens ?? 2048;
  const gpuKvBytes = ctx.vramBytes - neoGpuFixedBytes(ctx);
  return {
    name: `${ctx.hardware.name} + ${m.name} (cost model)`,
    nLayers: m.nLayers,
    linearMs: (tokens) => sumOf(Math.max(1, Math.round(tokens)), 0, false, 'gpu'),
    gpuPrefillAttnMs: (L) => sumOf(Math.max(1, Math.round(L)), 0, true, 'gpu'),
    gpuDecodeAttnMs: (kv) => (kv <= 0 ? 0 : sumOf(1, Math.round(kv), true, 'gpu')),
    cpuAttnMs: (kv) => (kv <= 0 ? 0 : sumOf(1, Math.round(kv), true, 'cpu')),
    headMs: (tokens) => ctx.cost.headTimes(Math.max(1, Math.round(tokens))).gpu ?? 0,
    kvBytesPerTokenLayer: 2 * kvDim * formatBytesPerElement(m.kvFormat),
    qkvoBytesPerToken: 2 * (2 * qDim + 2 * kvDim),
    pcieGBps: link.h2dPinnedGBps,
    gpuKvTokens: Math.max(0, Math.floor(gpuKvBytes / kvPerTok)),
    cpuKvTokens: Math.max(0, Math.floor(((opt.cpuKvShare ?? 0.6) * ctx.hostBytes) / kvPerTok)),
    maxBatchTokens: maxTokens,
  };
}

/**
 * The same costs through dense interpolation tables (8 points per octave): bounded memory and
 * constant time per call, within interpolation error of the source. Used as the simulator's truth.
 */
export function tabulatedCosts(c: OnlineCosts, perOctave = 8): OnlineCosts {
  const maxKv = Math.max(c.gpuKvTokens, c.cpuKvTokens, 1024) * 2;
  const tok = geometricGrid(1, Math.max(2, c.maxBatchTokens * 4), perOctave);
  const kv = geometricGrid(1, maxKv, perOctave);
  const lin = new LinearPredictor('linear', tok.map((x) => ({ x, ms: c.linearMs(x) })));
  const pre = new LinearPredictor('prefill attention', tok.map((x) => ({ x, ms: c.gpuPrefillAttnMs(x) })));
  const gdec = new LinearPredictor('GPU decode attention', kv.map((x) => ({ x, ms: c.gpuDecodeAttnMs(x) })));
  const cdec = new LinearPredictor('CPU decode attention', kv.map((x) => ({ x, ms: c.cpuAttnMs(x) })));
  const head = new LinearPredictor('head', tok.map((x) => ({ x, ms: c.headMs(x) })));
  return {
    ...c,
    name: `${c.name}, tabulated`,
    linearMs: (t) => lin.at(t),
    gpuPrefillAttnMs: (L) => pre.at(L),
    gpuDecodeAttnMs: (k) => (k <= 0 ? 0 : gdec.at(k)),
    cpuAttnMs: (k) => (k <= 0 ? 0 : cdec.at(k)),
    headMs: (t) => head.at(t),
  };
}
