// What the what-if panel and the extension exchange. The panel sends { type: 'action', action:
// 'replan', args: { requestId, settings } } on every control change; the extension asks the
// engine (fulcrum/explain, superseding the older what-if request) and answers with the same
// session's data plus `current` (or `error`) for that requestId.
import type { Plan, PresetsResult } from '../../engine/server/protocol';

export interface WhatIfSettings {
  /** VRAM budget, GiB; null = the hardware's own. */
  vramGiB: number | null;
  prompt: number;
  gen: number;
  batch: number;
  /** Weight format of a preset model; null = the model's own. */
  format: string | null;
  /** A GPU preset key added to (or replacing the GPU of) the hardware; null = the hardware as is. */
  gpu: string | null;
}

export interface WhatIfViewData {
  /** Same session = same baseline: the panel keeps its controls and only redraws the results. */
  session: string;
  presets: PresetsResult;
  modelLabel: string;
  /** Weight formats can change only for preset models (a GGUF file has its own). */
  modelIsPreset: boolean;
  hardware: string;
  baseline: Plan;
  baselineSettings: WhatIfSettings;
  current?: { requestId: number; plan: Plan; settings: WhatIfSettings; hardware: string };
  error?: { requestId: number; message: string };
}
