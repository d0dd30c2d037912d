// The status bar's words for where completions run when fulcrum.completions.endpoint is set. A
// pure function, so it is tested without VS Code.
import type { RemoteStatusParams } from '../engine/server/protocol';

/**
 * Where completions run, for the status bar: 'completions on HOST' before the first one,
 * 'on HOST (/infill)' after one ran there, 'on the local model (HOST failed)' after a fallback,
 * 'HOST failed, no local model' when nothing could answer.
 */
export function remoteText(endpoint: string, status: RemoteStatusParams | undefined): string {
  if (!status) return `completions on ${hostOf(endpoint)}`;
  if (status.ok) return `on ${status.endpoint}`;
  const host = status.endpoint.replace(/ \(.*\)$/, '');
  return status.fallback === 'local' ? `on the local model (${host} failed)` : `${host} failed, no local model`;
}

function hostOf(url: string): string {
  try { return new URL(url).host; } catch { return url; }
}
