// What-if settings → planner inputs. The GPU preset control adds a GPU the user may not have:
// on 'this' it sends `this+GPU` (the measured host with a preset GPU); on 'GPU+HOST' it swaps the
// GPU; on a host or machine name it sends 'GPU+NAME' (the engine names the problem if NAME is
// not a host).
import type { WhatIfSettings } from '../webviews/whatif/types';
import type { PlanInputs } from './planner';

export function whatIfHardware(base: string, gpu: string | null): string {
  if (!gpu) return base;
  const plus = base.indexOf('+');
  if (base === 'this' || base.startsWith('this+')) return `this+${gpu}`;
  if (plus > 0) return `${gpu}+${base.slice(plus + 1)}`;
  return `${gpu}+${base}`;
}

/** A preset model spec with its format replaced ('llama-3.1-8b:Q4_K' + Q8_0 → 'llama-3.1-8b:Q8_0'). */
export function withFormat(model: string, format: string | null): string {
  if (!format) return model;
  return `${model.split(':')[0]}:${format}`;
}

export function whatIfInputs(base: PlanInputs, s: WhatIfSettings, modelIsPreset: boolean): PlanInputs {
  const workload = [`batch=${s.batch}`, `prompt=${s.prompt}`, `gen=${s.gen}`, ...(s.vramGiB !== null ? [`vram=${s.vramGiB}G`] : [])].join(',');
  return {
    ...base,
    ...(base.model !== undefined ? { model: modelIsPreset ? withFormat(base.model, s.format) : base.model } : {}),
    hardware: whatIfHardware(base.hardware, s.gpu),
    workload,
  };
}

/** True when the model spec names a preset rather than a GGUF file. */
export function isPresetModel(model: string): boolean {
  return !/\.gguf$/i.test(model) && !model.includes('/') && !model.includes('\\');
}
