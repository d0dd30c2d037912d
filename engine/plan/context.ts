// Builds the PlanContext every policy receives.

import { ProfileCostModel } from '../cost/model';
import type { CostCorrection } from '../cost/feedback';
import type { LayerCostTable, StepShape, Workload } from '../cost/types';
import type { HardwareProfile } from '../hardware/types';
import type { ModelShape } from '../model/shape';
import type { PlanContext } from './policy';

const MAX_TOKENS = 10_000_000;

/** Checks a workload; errors name the field and the limit. */
export function validateWorkload(w: Workload, model?: ModelShape): void {
  const intField = (name: 'batch' | 'prompt' | 'gen', min: number): void => {
    const v = w[name];
    if (!Number.isInteger(v) || v < min || v > MAX_TOKENS) throw new Error(`workload: ${name} must be an integer in [${min}, ${MAX_TOKENS}], got ${v}`);
  };
  intField('batch', 1);
  intField('prompt', 1);
  intField('gen', 1);
  if (w.batch > 65536) throw new Error(`workload: batch ${w.batch} exceeds the limit 65536`);
  if (w.vramBytes !== undefined && (!Number.isFinite(w.vramBytes) || w.vramBytes < 0 || w.vramBytes > 2 ** 50)) {
    throw new Error(`workload: vram must be a byte count in [0, 1 PiB], got ${w.vramBytes}`);
  }
  if (w.rate !== undefined && (!Number.isFinite(w.rate) || w.rate <= 0 || w.rate > 1e6)) {
    throw new Error(`workload: rate must be requests/s in (0, 1e6], got ${w.rate}`);
  }
  if (w.batches !== undefined) {
    if (!Number.isInteger(w.batches) || w.batches < 1 || w.batches > w.batch) throw new Error(`workload: batches must be an integer in [1, batch = ${w.batch}], got ${w.batches}`);
    // B is the whole batch split into N equal batches (the paper's 2×25 is batch=50,batches=2).
    if (w.batch % w.batches !== 0) throw new Error(`workload: batch ${w.batch} does not split into ${w.batches} equal batches (batch must be a multiple of batches)`);
  }
  if (w.requests !== undefined && (!Number.isInteger(w.requests) || w.requests < 1 || w.requests > 100_000)) {
    throw new Error(`workload: requests must be an integer in [1, 100000], got ${w.requests}`);
  }
  if (w.requests !== undefined && w.rate === undefined) throw new Error('workload: requests applies to online workloads; give rate too (e.g. rate=2,requests=200)');
  if (model && w.prompt + w.gen > model.contextLength * 4) {
    // Decision: allow up to 4× the training context (RoPE scaling exists); beyond that is a typo.
    throw new Error(`workload: prompt + gen = ${w.prompt + w.gen} exceeds 4× the model's context length ${model.contextLength}`);
  }
}

/**
 * Decision: the decode stage is planned at the mid-generation context, prompt + ⌊gen/2⌋ tokens
 * already cached. Decode costs are affine in the context, so a step at the mean context times
 * gen equals the sum over all steps; one split per configuration, as paper 000 uses.
 */
export function decodeStepOf(w: Workload): StepShape {
  return { batch: w.batch, newTokens: 1, context: w.prompt + Math.floor(w.gen / 2) };
}

export function prefillStepOf(w: Workload): StepShape {
  return { batch: w.batch, newTokens: w.prompt, context: 0 };
}

export function makeContext(model: ModelShape, hardware: HardwareProfile, workload: Workload, measured?: LayerCostTable, correction?: CostCorrection): PlanContext {
  validateWorkload(workload, model);
  const gpu = hardware.gpu;
  const vram = gpu ? Math.max(0, (workload.vramBytes ?? gpu.memoryBytes) - gpu.reservedBytes) : 0;
  return {
    model, hardware, workload,
    cost: new ProfileCostModel(model, hardware, measured, correction),
    prefillStep: prefillStepOf(workload),
    decodeStep: decodeStepOf(workload),
    vramBytes: vram,
    hostBytes: hardware.memory.availableBytes,
  };
}
