// The status bar's one-line reading of a plan: how many layers run on the GPU and where the KV
// cache lives, e.g. "GPU 18/28 · KV host".
import type { Plan } from '../engine/server/protocol';

export function gpuLayerCount(plan: Plan): number {
  return plan.stages.decode.layers.filter((l) => l.ops.every((o) => o.weights === undefined || (o.device === 'gpu' && o.weights === 'gpu'))).length;
}

export function splitText(plan: Plan): string {
  const layers = plan.stages.decode.layers;
  const n = layers.length;
  const gpu = gpuLayerCount(plan);
  const splitOps = layers.some((l) => l.ops.some((o) => o.device === 'split' || (o.device === 'gpu' && o.weights !== undefined && o.weights !== 'gpu')));
  const kvGpu = layers.filter((l) => l.kv.device === 'gpu').length;
  const kv = kvGpu === n ? 'KV GPU' : kvGpu === 0 ? 'KV host' : `KV GPU ${kvGpu}/${n}`;
  if (plan.chosenPolicy === 'cpu-only' || (gpu === 0 && !splitOps && kvGpu === 0)) return 'CPU only';
  return `GPU ${gpu}/${n}${splitOps ? ' +streamed' : ''} · ${kv}`;
}
