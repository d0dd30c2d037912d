// Messages between the extension (or the test harness) and the Model Layers webview.
import type { LayersResult } from '../../engine/server/protocol';

export type ToLayersView =
  | { type: 'layers'; data: LayersResult; /** Where each layer runs (index → 'GPU' | 'CPU' | 'GPU+CPU'), from the plan. */ placement?: Record<number, string> }
  | { type: 'status'; message: string }
  | { type: 'error'; message: string };

export type FromLayersView = { type: 'ready' };

export function isFromLayersView(value: unknown): value is FromLayersView {
  return typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'ready';
}
