// The remote completion endpoint settings (fulcrum.completions.endpoint / .endpointKind / .token),
// validated into ServerOptions.remote. An empty endpoint turns remote completion off.
import type { ServerOptions } from './context';
import { invalidParams } from './validate';

export function parseRemoteOptions(method: string, params: Record<string, unknown>, where: string): Partial<ServerOptions> {
  const { completionEndpoint: url, completionEndpointKind: kind, completionEndpointToken: token } = params;
  if (url === undefined) return {};
  if (typeof url !== 'string') throw invalidParams(method, `${where}.completionEndpoint must be a URL string`);
  if (url.trim() === '') return { remote: undefined };
  try { const u = new URL(url); if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(); } catch {
    throw invalidParams(method, `${where}.completionEndpoint '${url}' must be an http(s) URL`);
  }
  if (kind !== undefined && kind !== 'auto' && kind !== 'infill' && kind !== 'openai') throw invalidParams(method, `${where}.completionEndpointKind must be auto, infill or openai`);
  if (token !== undefined && typeof token !== 'string') throw invalidParams(method, `${where}.completionEndpointToken must be a string`);
  return { remote: { url, ...(kind ? { kind } : {}), ...(token ? { token } : {}) } };
}
