// Explanations carried by every Plan: per decision, the alternatives with predicted costs, the
// binding resource, and what-if suggestions with their predicted effect.

export type Resource = 'vram-capacity' | 'pcie-bandwidth' | 'cpu-memory-bandwidth' | 'gpu-compute' | 'cpu-compute'
  | 'gpu-memory-bandwidth' | 'host-memory-capacity' | 'nvme-bandwidth' | 'launch-overhead';

export interface Alternative {
  label: string;
  /** Predicted decode layer or step time of the alternative (ms), whichever `metric` says. */
  predictedMs: number;
  metric: 'layerMs' | 'stepMs' | 'tokensPerSecond';
  /** Why it lost (or 'chosen'). */
  note?: string;
}

export interface Decision {
  /** Stable id, e.g. 'policy', 'split-points', 'layers-on-gpu', 'recompute-length'. */
  id: string;
  /** What was decided, in words. */
  chosen: string;
  alternatives: Alternative[];
  binding: Resource;
  reason: string;
}

export interface WhatIf {
  /** The change, e.g. 'context 32768 → 8192'. */
  change: string;
  /** Predicted effect, e.g. '+6 layers on GPU, +38 % tokens/s'. */
  effect: string;
  /** Relative change of tokens/s (0.38 = +38 %). */
  speedup: number;
}

export interface Explanation {
  summary: string;
  binding: Resource;
  decisions: Decision[];
  whatIf: WhatIf[];
}
