// The status bar's words for where completions run when fulcrum.completions.endpoint is set. A
// pure function, so it is tested without VS Code.
import type { RemoteStatusParams } from '../engine/server/protocol';

/**
 * Where completions run, for the status bar: 'completions on HOST' before the first one,
 * 'on HOST (/infill)' after one ran there, 'local (HOST failed)' after a fallback,
 * 'HOST failed' when nothing could answer (the label says there is no local model; the tooltip
 * gives the reason).
 */
export function remoteText(endpoint: string, status: RemoteStatusParams | undefined): string {
  if (!status) return `completions on ${hostOf(endpoint)}`;
  if (status.ok) return `on ${status.endpoint}`;
  const host = status.endpoint.replace(/ \(.*\)$/, '');
  return status.fallback === 'local' ? `local (${host} failed)` : `${host} failed`;
}

function hostOf(url: string): string {
  try { return new URL(url).host; } catch { return url; }
}
