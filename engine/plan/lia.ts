// lia: per-sublayer CPU/GPU placement with whole-layer residency and overlap (paper 002, LIA,
// ISCA'25; digest 002). For each stage the 64 placements of the six sublayers (QKV, Q·Kᵀ, S·V,
// output projection, FC1/gate+up, FC2/down) are scored with Eqs. (2)–(9) on the shared cost
// model (the CPU side uses the profile's GEMM rate — AMX where the host has it); as many whole
// layers as fit stay on the GPU (Opt-1) and run all-GPU; the others run the chosen placement with
// weights and KV in host memory, next-layer weights prefetched during compute (Opt-2).
// Decisions: the Eq. (8) compute terms come from the shared cost model's per-op roofline times
// (size-dependent, uncontended CPU), not the paper's scalar TH/BW, so LIA competes with the other
// policies on the same costs (the paper's scalar form is engine/plan/lia/cost.ts table1Terms, used
// by the paper tests); the token embedding is a lookup in host memory and is not placed.

import { bindingOf } from './binding';
import { gpuReadsKv } from './kv-format';
import type { Alternative, Decision } from './explanation';
import { headBytes, headOn, makeLayer, makePlan, makeStage, memoryUse, opOn, repeatLayers, sequentialLayerMs } from './build';
import type { Policy, PlanContext } from './policy';
import type { LayerPlan, Plan, PlanStage } from './types';
import { FULL_CPU, FULL_GPU, PARTIAL_CPU, type LayerTime, type LiaPolicyMask, policyBit, policyVector, searchTerms } from './lia/cost';
import { residentLayers } from './lia/residency';
import { layerKvBytesLia, layerWeightBytesLia } from './lia/sublayers';
import { batchAtSameDdr, cxlOffloadedFraction } from './lia/memory';
import { modelWeightBytes } from '../model/shape';
import { liaShapeOf, sublayerOfOps, termsFromCosts } from './lia/terms';

interface StageSearch {
  ranked: LayerTime[];
  chosen: LayerTime;
}

/** Q·Kᵀ and S·V (sublayers 2 and 3) on the CPU. */
function attentionOnCpu(p: LiaPolicyMask): boolean {
  return policyBit(p, 2) === 1 && policyBit(p, 3) === 1;
}

function searchStage(ctx: PlanContext, stage: 'prefill' | 'decode'): StageSearch {
  const step = stage === 'prefill' ? ctx.prefillStep : ctx.decodeStep;
  const table = ctx.cost.layerTimes(step, stage);
  const work = ctx.cost.layerWork(step);
  // A GPU that cannot read the KV cache's format leaves the placements with attention on the CPU.
  const kvOnGpu = gpuReadsKv(ctx);
  const ranked = searchTerms(termsFromCosts(ctx, table, work), stage).filter((t) => kvOnGpu || attentionOnCpu(t.policy));
  return { ranked, chosen: ranked[0]! };
}

const NAMED: [LiaPolicyMask, string][] = [[FULL_CPU, 'full CPU'], [PARTIAL_CPU, 'partial CPU (attention on CPU)'], [FULL_GPU, 'full GPU']];
function label(p: LiaPolicyMask): string {
  const named = NAMED.find(([m]) => m === p);
  return named ? `${policyVector(p)} ${named[1]}` : policyVector(p);
}

/** The best few placements plus the paper's three named ones, with their Eq. (2) layer times. */
function alternatives(s: StageSearch): Alternative[] {
  const pick = new Map<LiaPolicyMask, LayerTime>();
  for (const t of s.ranked.slice(0, 4)) pick.set(t.policy, t);
  for (const [m] of NAMED) { const t = s.ranked.find((x) => x.policy === m); if (t) pick.set(m, t); }
  const best = s.chosen.serialMs;
  return [...pick.values()].sort((a, b) => a.serialMs - b.serialMs).map((t) => ({
    label: label(t.policy), predictedMs: t.overlappedMs, metric: 'layerMs' as const,
    note: t.policy === s.chosen.policy ? 'chosen' : `Eq. (2) ${((t.serialMs / best - 1) * 100).toFixed(0)} % slower`,
  }));
}

function stageLayers(ctx: PlanContext, stage: 'prefill' | 'decode', s: StageSearch, resident: number): LayerPlan[] {
  const step = stage === 'prefill' ? ctx.prefillStep : ctx.decodeStep;
  const table = ctx.cost.layerTimes(step, stage);
  const work = ctx.cost.layerWork(step);
  const groups = sublayerOfOps(table.ops.map((o) => o.kind));
  const p = s.chosen.policy;
  const attnOnGpu = policyBit(p, 2) === 0 || policyBit(p, 3) === 0;
  // Resident layers run every sublayer on the GPU, attention too unless the GPU cannot read the
  // KV cache's format: then their attention runs on the CPU over host KV (kv-format.ts).
  const residentKvOnHost = !gpuReadsKv(ctx);
  const residentOps = table.ops.map((t, j) => residentKvOnHost && (groups[j] === 1 || groups[j] === 2) ? opOn(t, 'cpu', 'host') : opOn(t, 'gpu', 'gpu'));
  const streamedOps = table.ops.map((t, j) => {
    const onCpu = policyBit(p, groups[j]! + 1) === 1;
    return onCpu ? opOn(t, 'cpu', 'host') : opOn(t, 'gpu', 'pinned-host', { streamKv: true });
  });
  const msRes = sequentialLayerMs(ctx, residentOps, work.length === table.ops.length ? work : undefined, table);
  const msStr = s.chosen.overlappedMs;
  return repeatLayers(ctx.model.nLayers, (i) => i < resident
    ? makeLayer(i, residentOps, { device: residentKvOnHost ? 'cpu' : 'gpu' }, msRes)
    : makeLayer(i, streamedOps, { device: 'cpu', streamed: attnOnGpu }, msStr));
}

export const policy: Policy = {
  name: 'lia',
  title: 'Per-sublayer CPU/GPU placement (64-way search per stage), whole-layer residency, transfer/compute overlap',
  source: '002 (LIA, ISCA 2025)',
  applicable(ctx) {
    if (!ctx.hardware.gpu || !ctx.hardware.link) return { ok: false, reason: 'no GPU in the hardware profile' };
    // LIA's layer model (Table 1) sizes a dense FFN from d_ffn; routed experts would count as one.
    if (ctx.model.moe) return { ok: false, reason: 'LIA models a dense FFN; mixture-of-experts models are planned by moe-offload' };
    const amx = ctx.hardware.cpu.isa.amx;
    return { ok: true, reason: `searches 64 sublayer placements per stage; CPU matrix rate ${amx ? 'with AMX' : 'without AMX (LIA targets AMX CPUs)'}` };
  },
  plan(ctx): Plan {
    // The GPU's attention reads the KV cache's format (else attention and KV stay on the CPU, kv-format.ts).
    const kvOnGpu = gpuReadsKv(ctx);
    const L = ctx.model.nLayers;
    const pre = searchStage(ctx, 'prefill');
    const dec = searchStage(ctx, 'decode');
    const shape = liaShapeOf(ctx.model);
    const w = ctx.workload;
    // Decision (paper silent on the LM head): it stays on the GPU, reserved before whole layers
    // since it runs every step, unless it would take more than a quarter of the VRAM budget.
    const hb = headBytes(ctx);
    const headOnGpu = hb < 0.25 * ctx.vramBytes;
    const res = residentLayers({
      shape, nLayers: L, vramBytes: Math.max(0, ctx.vramBytes - (headOnGpu ? hb : 0)), batch: w.batch, maxContext: w.prompt + w.gen, promptTokens: w.prompt,
      prefillPolicy: pre.chosen.policy, decodePolicy: dec.chosen.policy, kvOnHost: !kvOnGpu,
    });
    const k = res.residentLayers;
    const prefill: PlanStage = makeStage({
      name: 'prefill', step: ctx.prefillStep, layers: stageLayers(ctx, 'prefill', pre, k), head: headOn(ctx, w.batch, headOnGpu),
      overlap: k < L ? 'prefill: next-layer weights stream over h2d while the current layer computes (Opt-2)' : 'none needed: all layers resident',
    });
    const decode: PlanStage = makeStage({
      name: 'decode', step: ctx.decodeStep, layers: stageLayers(ctx, 'decode', dec, k), head: headOn(ctx, w.batch, headOnGpu),
      overlap: k < L ? 'decode: the whole batch computes while the next layer\'s weights stream (no mini-batches, Opt-2)' : 'none needed: all layers resident',
    });
    const weights = layerWeightBytesLia(shape);
    const kvLayer = layerKvBytesLia(shape, w.batch, w.prompt + w.gen);
    const capacityLimited = k < L;
    // §6 / Table 3: with CXL memory, all parameters move to CXL and KV stays in DDR; the share of
    // host memory that moves ("Offloaded %") and the batch that then fits the same DDR.
    const cxlFraction = cxlOffloadedFraction(modelWeightBytes(ctx.model), shape, L, w.batch, w.prompt + w.gen);
    const cxlText = `CXL (§6, Table 3): parameters to CXL, KV in DDR would offload ${(cxlFraction * 100).toFixed(1)} % of host memory; the same DDR then holds batch ${Math.floor(batchAtSameDdr(w.batch, cxlFraction))}`;
    const decisions: Decision[] = [
      { id: 'prefill-policy', chosen: `prefill ${label(pre.chosen.policy)}`, alternatives: alternatives(pre), binding: bindingOf(ctx, prefill, false),
        reason: `lowest Eq. (2) layer time of 64 placements at B=${w.batch}, L=${w.prompt}` },
      { id: 'decode-policy', chosen: `decode ${label(dec.chosen.policy)}`, alternatives: alternatives(dec), binding: bindingOf(ctx, decode, false),
        reason: `lowest Eq. (2) layer time of 64 placements at B=${w.batch}, context ${ctx.decodeStep.context}` },
      { id: 'cxl', chosen: cxlText, alternatives: [], binding: 'host-memory-capacity' as const,
        reason: 'LIA §6: for large batches all parameter sublayers run on the GPU, so parameters can live in (slower) CXL memory while KV and activations stay in DDR' },
      { id: 'layers-on-gpu', chosen: `${k}/${L} whole layers resident on the GPU`, alternatives: [],
        binding: capacityLimited ? 'vram-capacity' : bindingOf(ctx, decode, false),
        reason: `each resident layer needs ${((weights + (kvOnGpu ? kvLayer : 0)) / 2 ** 30).toFixed(2)} GiB (${kvOnGpu ? 'weights + KV of B·(L_in+L_out)' : 'weights; its KV is in host memory'}); streaming buffers ${(res.streamingBytes / 2 ** 30).toFixed(2)} GiB; VRAM ${(ctx.vramBytes / 2 ** 30).toFixed(1)} GiB` },
    ];
    return makePlan(ctx, {
      policy: 'lia', prefill, decode,
      memory: memoryUse(ctx, {
        gpuBytes: k * (weights + (kvOnGpu ? kvLayer : 0)) + (capacityLimited ? res.streamingBytes : 0) + (headOnGpu ? hb : 0),
        pinnedBytes: (L - k) * weights,
        hostBytes: (kvOnGpu ? L - k : L) * kvLayer + (headOnGpu ? 0 : hb),
      }),
      explanation: {
        summary: (k === L
          ? `LIA: all ${L} layers fit on the GPU (Opt-1), so every sublayer runs there; no placement search applies. ${cxlText}.`
          : `LIA: ${k}/${L} layers resident on the GPU; the other ${L - k} run prefill ${label(pre.chosen.policy)} and decode ${label(dec.chosen.policy)} with host-resident weights and KV. ${cxlText}.`)
          + (kvOnGpu ? '' : ` Attention runs on the CPU over host KV in every layer, resident ones too: the GPU's attention reads ${ctx.hardware.gpu!.kvFormats!.join(', ')} KV only, and this model's KV cache is ${ctx.model.kvFormat}.`),
        binding: bindingOf(ctx, decode, capacityLimited), decisions, whatIf: [],
      },
      details: {
        prefillPolicy: policyVector(pre.chosen.policy), decodePolicy: policyVector(dec.chosen.policy), residentLayers: k,
        candidates: 64, cxlOffloadedFraction: cxlFraction, prefillMiniBatches: res.prefillMiniBatches, prefillSerialLayerMs: pre.chosen.serialMs, decodeSerialLayerMs: dec.chosen.serialMs,
      },
    });
  },
};
