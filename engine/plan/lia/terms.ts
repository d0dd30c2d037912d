// LIA's six sublayers over the shared cost model's op list: which ops form each sublayer, and
// the per-sublayer terms of Eqs. (4)–(9) taken from the cost model's per-op times (so LIA is
// compared with the other policies on the same costs, including a measured --costs table).

import type { LayerCostTable, OpKind, OpWork } from '../../cost/types';
import type { PlanContext } from '../policy';
import type { SublayerTerms } from './cost';
import { LIA_SUBLAYERS, type LiaLayerShape } from './sublayers';
import { ffnGated, formatBytesPerElement, type ModelShape } from '../../model/shape';

/**
 * Sublayer (0-based) of every op, in order. Decision (paper: "Softmax, LayerNorm and residual
 * are fused into neighbouring sublayers"): the attention norm, Q, K, V and RoPE form sublayer 1;
 * scores + softmax 2; weighted values 3; the output projection 4; the FFN norm with FC1 (or
 * gate + up) 5; FC2 (down) 6. Ops a --costs table names freely follow their position.
 */
export function sublayerOfOps(kinds: readonly OpKind[]): number[] {
  const out: number[] = [];
  let cur = 0;
  for (const k of kinds) {
    if (k === 'scores' || k === 'softmax') cur = 1;
    else if (k === 'wv') cur = 2;
    else if (k === 'out') cur = 3;
    else if (cur === 3) cur = 4; // first op after the output projection opens the FFN
    if (k === 'down' || k === 'fc2') cur = 5;
    out.push(cur);
  }
  return out;
}

/** Per-sublayer terms from the cost model's table for one stage's step. */
export function termsFromCosts(ctx: PlanContext, table: LayerCostTable, work: OpWork[] | undefined): SublayerTerms[] {
  const groups = sublayerOfOps(table.ops.map((o) => o.kind));
  const aligned = work && work.length === table.ops.length ? work : undefined;
  const terms: SublayerTerms[] = LIA_SUBLAYERS.map((name, i) => ({ name, xMs: 0, yMs: 0, yIsWeight: i !== 1 && i !== 2, cpuMs: 0, gpuMs: 0, storeMs: 0 }));
  const seen = new Set<number>();
  table.ops.forEach((t, j) => {
    const s = terms[groups[j]!]!;
    s.cpuMs += t.cpuSolo ?? t.cpu ?? 0;
    s.gpuMs += t.gpu ?? 0;
    s.yMs += t.h2d ?? 0; // weights and/or KV read by the op, over the link
    if (groups[j] === 0 && (t.kind === 'k' || t.kind === 'v')) s.storeMs += t.d2h ?? 0;
    if (!seen.has(groups[j]!)) {
      seen.add(groups[j]!);
      const bytes = aligned?.[j]?.actInBytes ?? 0;
      s.xMs = bytes > 0 ? ctx.cost.transferMs(bytes, 'h2d') : 0;
    }
  });
  return terms;
}

/** The LIA layer shape of a model (Table 1 generalised: GQA, gated FFN, storage formats). */
export function liaShapeOf(model: ModelShape): LiaLayerShape {
  return {
    dModel: model.nEmbd,
    dKv: model.nKvHeads * model.headDim,
    dFfn: model.nFf,
    fc1Matrices: ffnGated(model.family) ? 2 : 1,
    weightBytesPerElement: formatBytesPerElement(model.weightFormats.attn_q ?? 'F16'),
    actBytesPerElement: formatBytesPerElement(model.kvFormat),
  };
}
