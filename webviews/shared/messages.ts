// Messages between the extension (or the test harness) and every webview. Each view receives
// its data as { type: 'data', data } and status lines; it answers 'ready' once its listener is
// in place, and asks for actions (copy flags, export a trace, re-plan) with 'action'.

export type ToView<T> =
  | { type: 'data'; data: T }
  | { type: 'status'; message: string }
  | { type: 'error'; message: string };

export type FromView =
  | { type: 'ready' }
  | { type: 'action'; action: string; args?: Record<string, unknown> };

export function isFromView(value: unknown): value is FromView {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as { type?: unknown; action?: unknown };
  return m.type === 'ready' || (m.type === 'action' && typeof m.action === 'string');
}

export function isToView(value: unknown): value is ToView<unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const t = (value as { type?: unknown }).type;
  return t === 'data' || t === 'status' || t === 'error';
}
