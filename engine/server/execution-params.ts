// Where the loaded model executes, as the client asks in `initialize` or fulcrum/loadModel:
// device, VRAM budget, policy and KV cache format (engine/runtime/execution.ts).
import { parseBytes } from '../plan/api';
import { KV_FORMATS, type KvFormat } from '../runtime/types';
import type { ServerOptions } from './context';
import { invalidParams } from './validate';

/** device / vram / policy / kvFormat of initializationOptions or fulcrum/loadModel. */
export function parseExecutionParams(method: string, o: Record<string, unknown>, prefix = ''): ServerOptions['execution'] | undefined {
  const out: NonNullable<ServerOptions['execution']> = {};
  if (o.device !== undefined && o.device !== null) {
    if (o.device !== 'auto' && o.device !== 'cpu' && o.device !== 'loopback' && o.device !== 'vulkan') throw invalidParams(method, `${prefix}device must be 'auto', 'cpu', 'vulkan' or 'loopback', got ${JSON.stringify(o.device)}`);
    out.device = o.device;
  }
  if (o.vram !== undefined && o.vram !== null && o.vram !== '') {
    if (typeof o.vram === 'number' && Number.isSafeInteger(o.vram) && o.vram > 0) out.vramBytes = o.vram;
    else if (typeof o.vram === 'string') {
      try { out.vramBytes = parseBytes(o.vram, `${prefix}vram`); } catch (e) { throw invalidParams(method, (e as Error).message); }
    } else throw invalidParams(method, `${prefix}vram must be a size such as '6G' or a byte count`);
  }
  if (o.policy !== undefined && o.policy !== null && o.policy !== '') {
    if (typeof o.policy !== 'string') throw invalidParams(method, `${prefix}policy must be a string`);
    out.policy = o.policy;
  }
  if (o.kvFormat !== undefined && o.kvFormat !== null) {
    if (!KV_FORMATS.includes(o.kvFormat as KvFormat)) throw invalidParams(method, `${prefix}kvFormat must be ${KV_FORMATS.map((f) => `'${f}'`).join(' or ')}, got ${JSON.stringify(o.kvFormat)}`);
    out.kvFormat = o.kvFormat as KvFormat;
  }
  return Object.keys(out).length ? out : undefined;
}

