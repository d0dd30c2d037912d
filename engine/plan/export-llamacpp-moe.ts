// `--export llama.cpp` for plans that place MoE experts per layer (engine/plan/moe-offload.ts).
//
// llama.cpp (common/arg.cpp, since PR 15077):
// - `--cpu-moe` keeps every layer's routed-expert tensors (blk.N.ffn_{gate,up,down}_exps) in host
//   memory, computed on the CPU — the same as `-ot exps=CPU`;
// - `--n-cpu-moe N` does so for the experts of the first N layers only;
// - `-ot REGEX=CPU` (override-tensor) for any other set of layers.
// With `-ngl n_layer+1` everything else (attention, router ffn_gate_inp, shared expert, KV, output)
// is on the GPU. For prompt batches of ≥ 32 tokens the CUDA backend copies host experts to the GPU
// for the matmul, which is what the plan's prefill does when it is faster.
//
// What the flags cannot express: a layer's experts split between devices — ffn_*_exps is ONE
// tensor per layer holding all its experts. Decision: the flags keep ⌊GPU experts / E⌋ whole
// layers' experts on the GPU, the layers with the most planned GPU experts (ties: later layers),
// and say which planned per-expert placements they round away.

import type { LlamaCppExport } from './export-llamacpp-types';
import type { OpPlan, Plan } from './types';

const EXPS_REGEX = 'ffn_(up|down|gate)_exps';

function expertsOp(ops: OpPlan[]): OpPlan | undefined {
  return ops.find((o) => o.kind === 'experts' && o.experts !== undefined);
}

/** True when the plan carries per-layer expert placements (this exporter applies). */
export function hasExpertPlacement(plan: Plan): boolean {
  return plan.stages.decode.layers.some((l) => expertsOp(l.ops) !== undefined);
}

function shellQuote(word: string): string {
  return /^[A-Za-z0-9_.,=:/+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

function ranges(layers: number[]): string {
  const out: string[] = [];
  for (let i = 0; i < layers.length;) {
    let j = i;
    while (j + 1 < layers.length && layers[j + 1] === layers[j]! + 1) j++;
    out.push(i === j ? String(layers[i]) : `${layers[i]}–${layers[j]}`);
    i = j + 1;
  }
  return out.join(', ');
}

export function exportLlamaCppMoe(plan: Plan): LlamaCppExport {
  const stage = plan.stages.decode;
  const n = stage.layers.length;
  const unsupported: string[] = [];
  const perLayer = stage.layers.map((l) => {
    const e = expertsOp(l.ops);
    return { layer: l.index, onGpu: e?.experts?.onGpu.length ?? 0, count: e?.experts?.count ?? 1 };
  });
  const totalGpu = perLayer.reduce((a, p) => a + p.onGpu, 0);
  const E = perLayer[0]?.count ?? 1;
  const wholeLayers = Math.floor(totalGpu / E);
  const ranked = [...perLayer].sort((a, b) => b.onGpu - a.onGpu || b.layer - a.layer);
  const gpuSet = new Set(ranked.slice(0, wholeLayers).map((p) => p.layer));
  const cpuLayers = perLayer.filter((p) => !gpuSet.has(p.layer)).map((p) => p.layer);
  const rounded = perLayer.filter((p) => (p.onGpu > 0 && p.onGpu < p.count) || (gpuSet.has(p.layer) && p.onGpu < p.count));
  if (rounded.length) {
    unsupported.push(`per-expert placement in layer${rounded.length > 1 ? 's' : ''} ${ranges(rounded.map((p) => p.layer))} (${rounded.length <= 4 ? `${rounded.map((p) => `${p.onGpu}/${p.count}`).join(', ')} experts` : `${Math.min(...rounded.map((p) => p.onGpu))}–${Math.max(...rounded.map((p) => p.onGpu))} of ${E} experts each`} planned in VRAM): llama.cpp places a layer's experts as one tensor per matrix, so the flags keep whole layers — experts of ${ranges([...gpuSet].sort((a, b) => a - b)) || 'no layer'} on the GPU, the rest in host memory`);
  }

  // Everything but the routed experts on the GPU: attention, router, shared expert, KV, output.
  const others = stage.layers.flatMap((l) => l.ops.filter((o) => o.kind !== 'experts' && o.weights !== undefined && !(o.device === 'gpu' && o.weights === 'gpu')).map((o) => `L${l.index} ${o.name}`));
  if (others.length) unsupported.push(`non-expert weights off the GPU (${others.slice(0, 3).join(', ')}${others.length > 3 ? ` and ${others.length - 3} more` : ''}): the MoE flags put them on the GPU`);
  if (stage.layers.some((l) => l.kv.device !== 'gpu')) unsupported.push('KV cache off the GPU in some layers: with -ngl covering every layer llama.cpp keeps it in VRAM');
  const headOnGpu = stage.head.device === 'gpu' && stage.head.weights === 'gpu';

  const args: string[] = ['-ngl', String(n + 1)];
  if (cpuLayers.length === n) args.push('--cpu-moe');
  else if (cpuLayers.length > 0 && cpuLayers.every((l, i) => l === i)) args.push('--n-cpu-moe', String(cpuLayers.length));
  else if (cpuLayers.length > 0) args.push('-ot', `blk\\.(${cpuLayers.join('|')})\\.${EXPS_REGEX}=CPU`);
  if (!headOnGpu) args.push('-ot', 'output\\.weight=CPU');

  const w = plan.workload;
  const ctxPerSeq = w.prompt + w.gen;
  args.push('-c', String(ctxPerSeq * Math.max(1, w.batch)));
  if (w.batch > 1) args.push('-np', String(w.batch));
  // A Modelfile cannot keep experts in host memory: num_gpu n+1 would load every layer's experts
  // into VRAM. Ollama offloads whole layers (the last N), so it gets the layers whose experts
  // the plan keeps in VRAM; the other layers run on the CPU, attention included.
  const ollamaLayers = cpuLayers.length === 0 ? n + 1 : gpuSet.size;
  const ollama = [`PARAMETER num_gpu ${ollamaLayers}`, `PARAMETER num_ctx ${ctxPerSeq}`];
  if (cpuLayers.length > 0) unsupported.push(`Ollama: expert placement (--n-cpu-moe, -ot) has no Modelfile parameter; num_gpu ${ollamaLayers} counts the layers whose experts the plan keeps in VRAM (Ollama offloads whole layers: the others run on the CPU, attention included)`);
  return { args, commandLine: args.map(shellQuote).join(' '), ollama, unsupported };
}
