// Messages between the extension (or the test harness) and the Model Layers webview.
import type { LayersResult, RunsOn } from '../../engine/server/protocol';

export type ToLayersView =
  | {
    type: 'layers'; data: LayersResult;
    /** Where each layer runs now (index → 'GPU' | 'CPU' | 'GPU+CPU'; -1: embedding and output), from the engine's execution. */
    runsOn?: Record<number, RunsOn>;
    /** The executed split as the status bar shows it, e.g. "CPU only" or "GPU 18/24 layers · KV host". */
    split?: string;
    /** The plan panels' what-if plan: "<hardware>: <policy>, <split>". */
    whatIf?: string;
  }
  | { type: 'status'; message: string }
  | { type: 'error'; message: string };

export type FromLayersView = { type: 'ready' };

export function isFromLayersView(value: unknown): value is FromLayersView {
  return typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'ready';
}
