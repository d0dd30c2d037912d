// Where the loaded model executes, as the client asks in `initialize` or fulcrum/loadModel:
// device, VRAM budget and policy (engine/runtime/execution.ts).
import { parseBytes } from '../plan/api';
import type { ServerOptions } from './context';
import { invalidParams } from './validate';

/** device / vram / policy of initializationOptions or fulcrum/loadModel. */
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
  return Object.keys(out).length ? out : undefined;
}

