// What-if suggestions: re-plan with one thing changed and report the predicted effect
// ("VRAM 8 → 16 GiB: +6 layers on GPU, +38 % tokens/s").
//
// Decision: a fixed menu of changes a user can act on — more VRAM (×2), a shorter context
// (prompt ÷ 2), a smaller weight format (F16 → Q8_0 → Q4_K), a bigger batch (×2), a faster link
// (×2, one PCIe generation), a CPU with 2× memory bandwidth — each planned with the same policy
// (auto re-chooses). Only changes that alter the prediction by ≥ 1 % are reported, best first.

import { withSimulatedPrediction } from './predict';
import type { Workload } from '../cost/types';
import type { CostCorrection } from '../cost/feedback';
import type { HardwareProfile } from '../hardware/types';
import type { ModelShape, WeightRole } from '../model/shape';
import { makeContext } from './context';
import type { Policy } from './policy';
import type { Plan } from './types';
import type { WhatIf } from './explanation';

interface Change { change: string; model?: ModelShape; hardware?: HardwareProfile; workload?: Workload }

function gib(b: number): string { return `${(b / 2 ** 30).toFixed(b < 10 * 2 ** 30 ? 1 : 0)} GiB`; }

function withFormat(m: ModelShape, f: string): ModelShape {
  const weightFormats: Partial<Record<WeightRole, string>> = {};
  for (const k of Object.keys(m.weightFormats) as WeightRole[]) weightFormats[k] = f;
  return { ...m, name: `${m.name} (${f})`, weightFormats };
}

function changes(model: ModelShape, hw: HardwareProfile, w: Workload): Change[] {
  const out: Change[] = [];
  if (hw.gpu) {
    const vram = w.vramBytes ?? hw.gpu.memoryBytes;
    out.push({ change: `VRAM ${gib(vram)} → ${gib(vram * 2)}`, workload: { ...w, vramBytes: vram * 2 } });
    if (hw.link) {
      const l = hw.link;
      out.push({ change: `host link ${l.h2dPinnedGBps} → ${l.h2dPinnedGBps * 2} GB/s (next PCIe generation)`, hardware: { ...hw, link: { ...l, h2dPinnedGBps: l.h2dPinnedGBps * 2, h2dPageableGBps: l.h2dPageableGBps * 2, d2hPinnedGBps: l.d2hPinnedGBps * 2, d2hPageableGBps: l.d2hPageableGBps * 2 } } });
    }
  }
  if (w.prompt >= 2) out.push({ change: `context ${w.prompt + w.gen} → ${Math.floor(w.prompt / 2) + w.gen} tokens (prompt ÷ 2)`, workload: { ...w, prompt: Math.floor(w.prompt / 2) } });
  const fmt = model.weightFormats.attn_q ?? 'F16';
  const next = fmt === 'F32' || fmt === 'F16' || fmt === 'BF16' ? 'Q8_0' : fmt === 'Q8_0' || fmt === 'Q6_K' ? 'Q4_K' : undefined;
  if (next) out.push({ change: `weights ${fmt} → ${next}`, model: withFormat(model, next) });
  out.push({ change: `batch ${w.batch} → ${w.batch * 2}`, workload: { ...w, batch: w.batch * 2 } });
  const c = hw.cpu;
  out.push({
    change: `CPU memory bandwidth ${c.memory.readGBps} → ${c.memory.readGBps * 2} GB/s`,
    hardware: { ...hw, cpu: { ...c, memory: { readGBps: c.memory.readGBps * 2, copyGBps: c.memory.copyGBps * 2 }, kernels: c.kernels.map((k) => (k.gbps ? { ...k, gbps: k.gbps * 2 } : k)), attention: c.attention.map((a) => ({ ...a, gbps: a.gbps * 2 })) } },
  });
  return out;
}

function gpuLayers(p: Plan): number {
  return p.stages.decode.layers.filter((l) => l.ops.every((o) => o.device === 'gpu') && l.weights === 'gpu').length;
}

/** MoE plans: routed experts resident in VRAM over all layers (0 for dense plans). */
function gpuExperts(p: Plan): number {
  let n = 0;
  for (const l of p.stages.decode.layers) for (const o of l.ops) n += o.experts?.onGpu.length ?? 0;
  return n;
}

export function whatIfs(policy: Policy, base: Plan, model: ModelShape, hw: HardwareProfile, w: Workload, correction?: CostCorrection): WhatIf[] {
  const out: WhatIf[] = [];
  const baseTps = base.predicted.tokensPerSecond;
  const baseGpu = gpuLayers(base);
  for (const ch of changes(model, hw, w)) {
    let plan: Plan;
    try {
      // The base plan's measured correction applies to every what-if, so each is compared like
      // with like (this machine's measured errors, on the changed figures).
      const ctx = makeContext(ch.model ?? model, ch.hardware ?? hw, ch.workload ?? w, undefined, correction);
      if (!policy.applicable(ctx).ok) continue;
      // Same figures as the plan itself reports (simulated, engine/plan/predict.ts); auto's are already.
      plan = policy.name === 'auto' ? policy.plan(ctx) : withSimulatedPrediction(policy.plan(ctx), ctx, policy).plan;
    } catch { continue; }
    const speedup = baseTps > 0 ? plan.predicted.tokensPerSecond / baseTps - 1 : 0;
    if (Math.abs(speedup) < 0.01) continue;
    const parts: string[] = [];
    const dl = gpuLayers(plan) - baseGpu;
    if (dl !== 0) parts.push(`${dl > 0 ? '+' : ''}${dl} layers resident on GPU`);
    const de = gpuExperts(plan) - gpuExperts(base);
    if (de !== 0) parts.push(`${de > 0 ? '+' : ''}${de} experts in VRAM`);
    if (plan.chosenPolicy !== base.chosenPolicy) parts.push(`policy ${base.chosenPolicy} → ${plan.chosenPolicy}`);
    parts.push(`${speedup >= 0 ? '+' : ''}${(speedup * 100).toFixed(0)} % tokens/s (${baseTps.toFixed(1)} → ${plan.predicted.tokensPerSecond.toFixed(1)})`);
    if (!plan.memory.fits) parts.push('does not fit in memory');
    out.push({ change: ch.change, effect: parts.join(', '), speedup });
  }
  return out.sort((a, b) => b.speedup - a.speedup);
}
