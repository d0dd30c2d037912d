// Which KV cache formats the GPU's attention reads (GpuProfile.kvFormats: the Vulkan shader reads
// F16 only), and the check every plan passes: a plan that runs attention on the GPU over a KV
// cache in a format the GPU's attention cannot read would be refused by the executor, so `auto`
// does not choose it and an explicitly asked policy says why. LIA, whose point is attention on
// the CPU, plans that way when the GPU cannot read the cache (engine/plan/lia.ts).
import type { PlanContext } from './policy';
import type { Plan, PlanStage } from './types';

const ATTENTION_KINDS: ReadonlySet<string> = new Set(['scores', 'softmax', 'wv']);

/** Whether the GPU's attention reads the model's KV format (true without a GPU or a stated list). */
export function gpuReadsKv(ctx: Pick<PlanContext, 'model' | 'hardware'>): boolean {
  const formats = ctx.hardware.gpu?.kvFormats;
  return formats === undefined || formats.includes(ctx.model.kvFormat);
}

/** Why the plan cannot run on this GPU with this KV format (attention on the GPU), or undefined when it can. */
export function kvFormatConflict(plan: Plan, ctx: Pick<PlanContext, 'model' | 'hardware'>): string | undefined {
  if (gpuReadsKv(ctx)) return undefined;
  const where = (stage: PlanStage): number | undefined => stage.layers.find((l) =>
    l.kv.device !== 'cpu' || l.ops.some((o) => ATTENTION_KINDS.has(o.kind) && o.device !== 'cpu'))?.index;
  for (const stage of [plan.stages.decode, plan.stages.prefill]) {
    const layer = where(stage);
    if (layer === undefined) continue;
    return `it runs attention (or keeps the KV) on the GPU in layer ${layer} of the ${stage.name} stage, and the GPU's attention reads ${ctx.hardware.gpu!.kvFormats!.join(', ')} KV only while this model's KV cache is ${ctx.model.kvFormat} (kvFormat)`;
  }
  return undefined;
}
