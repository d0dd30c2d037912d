// kvpr (paper 001): KV cache offloaded to host memory; per layer and decode step, the first l
// cached tokens' activations X are sent instead of their K,V and recomputed on the GPU while the
// rest of the KV streams (engine/plan/kvpr-solve.ts). All compute on the GPU; no CPU compute.
//
// Decisions:
// - Mode: row-by-row (weights resident, the paper's latency mode) when all weights fit in VRAM
//   next to the workspace; otherwise column-by-column (weights stream too, throughput mode).
// - l is solved at the planned decode step's s (context + 1) for every layer (all layers have the
//   same shape, so the same l); the runtime re-solves it each step — O(1) with the closed form.
// - v_gpu = GPU fp16 peak × measured GEMM efficiency; v_com = pinned H2D bandwidth.
// - Fine-grained pipeline (paper §3, Fig. 5b): weights are transferred in the order W_K, W_V,
//   W_Q, W_O, FFN, so recomputation can start before the other weights arrive.
// - Stored activation X is the post-norm attention input (so LayerNorm is not recomputed); the
//   host keeps X for every cached token next to K,V (+50 % of the KV bytes without GQA).
// - Layer time = max(link: X + KV[l:s] (+ weights), GPU: layer compute + recompute); the link
//   part uses Eq. 11's max(recompute, KV) where recompute waits only for X.
// - Not applicable with a measured --costs table (KVPR plans from v_com and v_gpu).

import { bindingOf } from './binding';
import type { Alternative } from './explanation';
import { formatBytesPerElement, modelWeightBytes, weightBytes } from '../model/shape';
import { headBytes, headOn, kvBytesPerLayer, layerBytes, makeLayer, makePlan, makeStage, memoryUse, opOn, repeatLayers, sequentialLayerMs, workspaceBytes } from './build';
import { gpuStageLayers } from './gpu-only';
import { kvprSolve, kvprTimes, type KvprProblem } from './kvpr-solve';
import type { Policy, PlanContext } from './policy';
import type { Plan } from './types';

export function kvprProblem(ctx: PlanContext): KvprProblem {
  const g = ctx.hardware.gpu!;
  const m = ctx.model;
  return {
    s: ctx.decodeStep.context + 1, b: ctx.decodeStep.batch, h: m.nEmbd, hKv: m.nKvHeads * m.headDim,
    p: formatBytesPerElement(m.kvFormat), vGpu: g.fp16Tflops * 1e12 * g.efficiency.gemm, vCom: ctx.hardware.link!.h2dPinnedGBps * 1e9,
  };
}

function weightsFit(ctx: PlanContext): boolean {
  return modelWeightBytes(ctx.model) - weightBytes(ctx.model, 'token_embd') + workspaceBytes(ctx) + 2 * kvBytesPerLayer(ctx) <= ctx.vramBytes;
}

export const WEIGHT_ORDER_FINE = ['K', 'V', 'Q', 'Output'];

export const policy: Policy = {
  name: 'kvpr',
  title: 'KV in host memory; recompute a prefix of K,V from activations on the GPU while the rest streams',
  source: 'paper 001 (KVPR, Jiang et al.)',
  applicable(ctx) {
    if (!ctx.hardware.gpu || !ctx.hardware.link) return { ok: false, reason: 'no GPU in the hardware profile' };
    if (ctx.cost.measured) return { ok: false, reason: 'kvpr plans from v_com and v_gpu of the profile, not from a --costs table' };
    const need = ctx.model.nLayers * (layerBytes(ctx) + kvBytesPerLayer(ctx)) + headBytes(ctx) + workspaceBytes(ctx);
    if (need <= ctx.vramBytes) return { ok: false, reason: 'KV fits in VRAM with the weights: no KV offloading needed' };
    const q = kvprProblem(ctx);
    return { ok: true, reason: q.h >= 2 * q.hKv ? `KV must be offloaded; with GQA (h = ${q.h} ≥ 2·h_kv = ${2 * q.hKv}) X is not smaller than K+V, so l = 0 (plain KV streaming)` : 'KV must be offloaded to host memory' };
  },
  plan(ctx) { return planKvpr(ctx); },
};

/** The KVPR plan; `forcedL` fixes the recompute length (0 = plain KV streaming, the paper's baseline). */
export function planKvpr(ctx: PlanContext, forcedL?: number): Plan {
  const L = ctx.model.nLayers;
  const q = kvprProblem(ctx);
  const best = forcedL === undefined ? kvprSolve(q) : kvprTimes(q, Math.max(0, Math.min(q.s, Math.floor(forcedL))));
  const base = kvprTimes(q, 0);
  const rowMode = weightsFit(ctx);
  const table = ctx.cost.layerTimes(ctx.decodeStep, 'decode');
  const work = ctx.cost.layerWork(ctx.decodeStep);
  const residency = rowMode ? 'gpu' as const : 'pinned-host' as const;
  const ops = table.ops.map((t) => {
    const o = opOn(t, 'gpu', residency);
    // X[0:l] arrives with K's op, which recomputes K[0:l] (and V's op V[0:l]); K[l:s] and V[l:s]
    // stream for Scores and WV — the simulator then overlaps recompute with the KV stream.
    if (t.kind === 'k' && best.xMs > 0) { o.predictedMs.h2d = (o.predictedMs.h2d ?? 0) + best.xMs; o.predictedMs.h2dKv = best.xMs; }
    if (t.kind === 'scores' || t.kind === 'wv') { o.predictedMs.h2d = best.kvMs / 2; o.predictedMs.h2dKv = best.kvMs / 2; }
    if (t.kind === 'k' || t.kind === 'v') o.predictedMs.gpu = (o.predictedMs.gpu ?? 0) + best.recomputeMs / 2;
    if (t.d2h) o.predictedMs.d2h = t.d2h; // new token's K, V back to host
    return o;
  });
  const computeMs = sequentialLayerMs(ctx, ops.map((o) => ({ ...o, predictedMs: { gpu: o.predictedMs.gpu ?? 0 } })), work, table);
  const streamedWeightMs = rowMode ? 0 : table.ops.reduce((s, t) => s + Math.max(0, (t.h2d ?? 0) - (t.h2dKv ?? 0)), 0);
  const layerMs = Math.max(best.totalMs + streamedWeightMs, computeMs);
  const layers = repeatLayers(L, (i) => {
    const lp = makeLayer(i, ops, { device: 'cpu', streamed: true, recomputePrefix: best.l }, layerMs);
    if (!rowMode) lp.weightOrder = [...WEIGHT_ORDER_FINE, ...table.ops.filter((t) => !['q', 'k', 'v', 'out'].includes(t.kind) && (t.h2d ?? 0) > (t.h2dKv ?? 0)).map((t) => t.name)];
    return lp;
  });
  const decode = makeStage({
    name: 'decode', step: ctx.decodeStep, layers, head: headOn(ctx, ctx.workload.batch, true),
    overlap: `${rowMode ? 'row-by-row (weights resident)' : 'column-by-column (weights streamed, W_K and W_V first)'}: X[0:${best.l}] then K,V[${best.l}:${q.s}] over H2D while the GPU recomputes K,V[0:${best.l}]; next layer prefetched (double buffering)`,
  });
  const prefill = makeStage({
    name: 'prefill', step: ctx.prefillStep, layers: gpuStageLayers(ctx, 'prefill', rowMode ? L : 0, true), head: headOn(ctx, ctx.workload.batch, true),
    overlap: 'prefill unchanged (paper 001 affects decode only); new KV and X stored to host per layer',
  });
  const kvHost = L * kvBytesPerLayer(ctx);
  const xHost = L * ctx.workload.batch * (ctx.workload.prompt + ctx.workload.gen) * ctx.model.nEmbd * q.p;
  const alternatives: Alternative[] = [
    { label: `l = ${best.l} (recompute ${(100 * best.l / q.s).toFixed(0)} % of the cached tokens)`, predictedMs: best.totalMs, metric: 'layerMs', note: 'chosen' },
    { label: 'l = 0 (stream all KV, FlexGen/HF offloading)', predictedMs: base.totalMs, metric: 'layerMs' },
    { label: `l = s = ${q.s} (recompute everything)`, predictedMs: kvprTimes(q, q.s).totalMs, metric: 'layerMs' },
  ];
  const binding = bindingOf(ctx, decode, true);
  return makePlan(ctx, {
    policy: 'kvpr', prefill, decode,
    memory: memoryUse(ctx, {
      gpuBytes: (rowMode ? modelWeightBytes(ctx.model) - weightBytes(ctx.model, 'token_embd') : 2 * layerBytes(ctx) + headBytes(ctx)) + workspaceBytes(ctx) + 2 * kvBytesPerLayer(ctx),
      pinnedBytes: kvHost + xHost + (rowMode ? 0 : L * layerBytes(ctx)), hostBytes: 0,
    }),
    explanation: {
      summary: `KV (${(kvHost / 2 ** 30).toFixed(1)} GiB) in host memory; per layer, K,V of the first ${best.l} of ${q.s} tokens are recomputed from X on the GPU: KV load ${best.totalMs.toFixed(3)} ms vs ${base.totalMs.toFixed(3)} ms streaming all KV.`,
      binding,
      decisions: [{
        id: 'recompute-length', chosen: `l = ${best.l}`, alternatives, binding: 'pcie-bandwidth',
        reason: `Eq. 11: X ${best.xMs.toFixed(3)} ms + max(recompute ${best.recomputeMs.toFixed(3)} ms, KV ${best.kvMs.toFixed(3)} ms); v_gpu ${(q.vGpu / 1e12).toFixed(0)} TFLOP/s, v_com ${(q.vCom / 1e9).toFixed(1)} GB/s`,
      }, {
        id: 'mode', chosen: rowMode ? 'row-by-row (weights resident)' : 'column-by-column (weights streamed)', alternatives: [],
        binding: rowMode ? 'pcie-bandwidth' : 'vram-capacity', reason: rowMode ? 'all weights fit in VRAM' : 'weights do not fit in VRAM',
      }],
      whatIf: [],
    },
    details: { recomputePrefix: best.l, s: q.s, kvLoadMs: best.totalMs, kvLoadBaselineMs: base.totalMs, mode: rowMode ? 'row' : 'column', xHostBytes: xHost },
  });
}
