// `fulcrum plan --export llama.cpp`: the llama.cpp (llama-cli / llama-server) flags that
// reproduce a plan's decode placement as far as llama.cpp can express it, the Ollama parameters
// that match, and a plain list of what the flags cannot express.
//
// What llama.cpp can express (as of its -ngl / -ot / -nkvo options):
// - `-ngl N` puts the weights of the LAST N repeating layers on the GPU, and the output (LM head)
//   too when N > n_layer; each layer's KV cache lives with its layer.
// - `-ot REGEX=CPU` (override-tensor) keeps the matching weight tensors in host memory; llama.cpp
//   then runs those matmuls on the CPU (for one-token decode steps).
// - `-nkvo` (no KV offload) keeps every layer's KV cache in host memory, and attention runs on the CPU.
// - `-c` the context size (all sequences together), `-np` parallel sequences.
// What it cannot: one op split between CPU and GPU, weights streamed to the GPU each step,
// KV split per request or streamed, KV recomputation, sub-batch pipelines, NVMe→GPU transfers.

import type { LayerPlan, OpPlan, Plan } from './types';
import type { LlamaCppExport } from './export-llamacpp-types';
export type { LlamaCppExport } from './export-llamacpp-types';
import { exportLlamaCppMoe, hasExpertPlacement } from './export-llamacpp-moe';

/** The GGUF tensor (per layer, after `blk.N.`) holding each weighted op's matrix. */
const TENSOR_OF_KIND: Partial<Record<OpPlan['kind'], string>> = {
  q: 'attn_q', k: 'attn_k', v: 'attn_v', out: 'attn_output',
  gate: 'ffn_gate', up: 'ffn_up', down: 'ffn_down', fc1: 'ffn_up', fc2: 'ffn_down',
  router: 'ffn_gate_inp', experts: 'ffn_(up|down|gate)_exps', shared_expert: 'ffn_(up|down|gate)_shexp',
};

function weighted(l: LayerPlan): OpPlan[] {
  return l.ops.filter((o) => TENSOR_OF_KIND[o.kind] !== undefined && o.weights !== undefined);
}

/** Where llama.cpp would have to keep this op's weights: 'gpu' only if resident and computed there. */
function weightDevice(o: OpPlan): 'gpu' | 'cpu' {
  return o.device === 'gpu' && o.weights === 'gpu' ? 'gpu' : 'cpu';
}

function shellQuote(word: string): string {
  return /^[A-Za-z0-9_.,=:/+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Collapses layer indices to a regex alternation, e.g. [0,1,2,7] → '(0|1|2|7)'. */
function layerAlternation(layers: number[]): string {
  return layers.length === 1 ? String(layers[0]) : `(${layers.join('|')})`;
}

export function exportLlamaCpp(plan: Plan): LlamaCppExport {
  // MoE plans placing experts per layer: --cpu-moe / --n-cpu-moe / -ot …_exps (export-llamacpp-moe.ts).
  if (hasExpertPlacement(plan)) return exportLlamaCppMoe(plan);
  const stage = plan.stages.decode;
  const n = stage.layers.length;
  const unsupported: string[] = [];
  const layerOnGpu = stage.layers.map((l) => weighted(l).length > 0 && weighted(l).every((o) => weightDevice(o) === 'gpu'));
  const headOnGpu = weightDevice(stage.head) === 'gpu';

  // Ops llama.cpp cannot place as planned.
  const splitOps = stage.layers.flatMap((l) => l.ops.filter((o) => o.device === 'split').map((o) => `L${l.index} ${o.name}`));
  if (stage.head.device === 'split') splitOps.push('LM head');
  if (splitOps.length) unsupported.push(`ops split between CPU and GPU (${summarise(splitOps)}): llama.cpp runs each tensor on one device; the flags keep their weights in host memory (CPU)`);
  const streamed = stage.layers.flatMap((l) => l.ops.filter((o) => o.device !== 'cpu' && (o.weights === 'pinned-host' || o.weights === 'nvme')).map((o) => `L${l.index} ${o.name}`));
  if (streamed.length) unsupported.push(`weights streamed to the GPU every step (${summarise(streamed)}): llama.cpp has no per-step weight streaming for decode; the flags keep them in host memory and compute them on the CPU`);

  const args: string[] = [];
  // -ngl: the largest suffix of GPU layers; layers outside it that the plan puts on the GPU, or
  // inside it that it puts on the CPU, need -ot overrides.
  let suffix = 0;
  while (suffix < n && layerOnGpu[n - 1 - suffix]) suffix++;
  const cpuInsideGpu: { layer: number; tensors: string[] }[] = [];
  const gpuOutsideSuffix = stage.layers.filter((_, i) => i < n - suffix && layerOnGpu[i]).map((l) => l.index);
  let ngl: number;
  if (gpuOutsideSuffix.length === 0 && (!headOnGpu || suffix === n)) {
    ngl = suffix === n && headOnGpu ? n + 1 : suffix;
  } else {
    // GPU layers are not a suffix (or the head is on the GPU without all layers): offload
    // everything and send the CPU parts back with -ot.
    ngl = n + 1;
  }
  const gpuFrom = ngl >= n ? 0 : n - ngl;
  // Per layer the llama.cpp placement would put on the GPU, list tensors the plan keeps on the CPU.
  stage.layers.forEach((l, i) => {
    if (i < gpuFrom) {
      // llama.cpp keeps this layer on the CPU; any GPU op in it cannot be expressed.
      const gpuOps = weighted(l).filter((o) => weightDevice(o) === 'gpu');
      if (gpuOps.length) unsupported.push(`L${l.index}: ${gpuOps.map((o) => o.name).join(', ')} on the GPU while earlier layers stay on the CPU`);
      return;
    }
    const onCpu = weighted(l).filter((o) => weightDevice(o) === 'cpu').map((o) => TENSOR_OF_KIND[o.kind]!);
    if (onCpu.length) cpuInsideGpu.push({ layer: l.index, tensors: [...new Set(onCpu)] });
  });
  args.push('-ngl', String(ngl));
  const layerTensors = (l: LayerPlan) => new Set(weighted(l).map((o) => TENSOR_OF_KIND[o.kind]!));
  // Group layers with the same CPU tensor set into one -ot regex each.
  const groups = new Map<string, number[]>();
  for (const { layer, tensors } of cpuInsideGpu) {
    const key = tensors.sort().join('|');
    groups.set(key, [...(groups.get(key) ?? []), layer]);
  }
  for (const [key, layers] of groups) {
    const tensors = key.split('|');
    // All of a layer's matrices on the CPU: match the whole block (its norms follow).
    const whole = tensors.length === layerTensors(stage.layers[layers[0]!]!).size;
    const tensorPart = whole ? '' : tensors.length === 1 ? `${tensors[0]}\\.` : `(${tensors.join('|')})\\.`;
    args.push('-ot', `blk\\.${layerAlternation(layers)}\\.${tensorPart}=CPU`);
  }
  if (ngl === n + 1 && !headOnGpu) args.push('-ot', 'output\\.weight=CPU');

  // KV: llama.cpp keeps each layer's KV with its layer (GPU layers: VRAM) unless -nkvo puts
  // all of it in host memory.
  // The KV cache goes where -ngl puts the layer, whatever -ot does to its weights.
  const llamaLayerOnGpu = stage.layers.map((_, i) => i >= gpuFrom);
  const kvAsLlama = stage.layers.every((l, i) => l.kv.device === (llamaLayerOnGpu[i] ? 'gpu' : 'cpu'));
  if (!kvAsLlama) {
    if (stage.layers.every((l) => l.kv.device === 'cpu')) args.push('-nkvo');
    else {
      const odd = stage.layers.filter((l, i) => l.kv.device !== (llamaLayerOnGpu[i] ? 'gpu' : 'cpu')).map((l) => `L${l.index}`);
      unsupported.push(`KV cache of ${summarise(odd)} ${stage.layers.some((l) => l.kv.device === 'split') ? 'split between devices or ' : ''}elsewhere than llama.cpp would put it: llama.cpp keeps each layer's KV on the device -ngl gives the layer (tensor overrides do not move it), or all of it in host memory with -nkvo`);
    }
  }
  if (stage.layers.some((l) => l.kv.streamed)) unsupported.push('KV streamed from host memory to the GPU each step: llama.cpp computes attention where the KV lives');
  if (stage.layers.some((l) => (l.kv.recomputePrefix ?? 0) > 0)) unsupported.push('KV recomputation of a prefix (KVPR): not in llama.cpp');
  if (stage.subBatches?.length) unsupported.push(`${stage.subBatches.length} pipelined sub-batches: llama.cpp runs one batch per step`);

  const w = plan.workload;
  const ctxPerSeq = w.prompt + w.gen;
  args.push('-c', String(ctxPerSeq * Math.max(1, w.batch)));
  if (w.batch > 1) args.push('-np', String(w.batch));

  // A Modelfile has no -ot: with overrides, -ngl's count would load every layer into VRAM, so
  // Ollama gets the layers whose weights the plan keeps there.
  const overrides = args.includes('-ot');
  const ollamaLayers = overrides ? layerOnGpu.filter(Boolean).length : ngl;
  const ollama = [`PARAMETER num_gpu ${ollamaLayers}`, `PARAMETER num_ctx ${ctxPerSeq}`];
  if (overrides || args.includes('-nkvo')) unsupported.push(`Ollama: tensor overrides (-ot) and -nkvo have no Modelfile parameter; num_gpu ${ollamaLayers} counts the layers whose weights the plan keeps in VRAM`);
  return { args, commandLine: args.map(shellQuote).join(' '), ollama, unsupported };
}

function summarise(items: string[]): string {
  return items.length <= 4 ? items.join(', ') : `${items.slice(0, 3).join(', ')} and ${items.length - 3} more`;
}

/** The text `fulcrum plan --export llama.cpp` prints. */
export function formatLlamaCppExport(plan: Plan, e: LlamaCppExport): string {
  const lines = [
    `# llama.cpp flags for the ${plan.chosenPolicy} plan of ${plan.model.name} on ${plan.hardware.name} (decode placement)`,
    e.commandLine,
    '',
    '# Ollama (Modelfile)',
    ...e.ollama,
    '',
  ];
  if (e.unsupported.length) lines.push('# Not expressible with these flags:', ...e.unsupported.map((u) => `#  - ${u}`), '');
  else lines.push('# The flags express the whole placement of this plan.', '');
  return lines.join('\n');
}
