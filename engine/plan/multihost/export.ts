// `fulcrum plan --export vllm|llama.cpp|ollama` for multi-host (pipeline) plans, and vLLM /
// Ollama for single-host plans. Each export lists what its engine cannot express.
// Flags checked in test/unit/multihost-export.test.ts against each engine's own argument list.
//
// Decision: cpu-offload-gb (vLLM, per GPU) is the weight bytes of the layers the stage's plan
// keeps off the GPU, rounded up to a whole GiB; vLLM offloads whole weights and streams them
// back every forward, which is what a Fulcrum 'stream' plan does, not what 'split' plans do.

import { layerWeightBytes, type ModelShape } from '../../model/shape';
import { exportLlamaCpp } from '../export-llamacpp';
import { hasExpertPlacement } from '../export-llamacpp-moe';
import type { Plan } from '../types';
import type { ClusterPlan } from './pipeline';

export interface EngineExport {
  engine: 'vllm' | 'llama.cpp' | 'ollama';
  /** Commands to run, one per line (shell), or a Modelfile's lines for Ollama. */
  commands: string[];
  unsupported: string[];
}

const GiB = 1024 ** 3;
const DEFAULT_RPC_PORT = 50052;

function quote(word: string): string {
  return /^[A-Za-z0-9_.,=:/+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Layers of a single-host plan whose weights are not resident on the GPU. */
function offGpuLayers(plan: Plan): number {
  return plan.stages.decode.layers.filter((l) => l.weights !== 'gpu').length;
}

function kvDtype(model: ModelShape): string {
  // vLLM's 'auto' is the model's dtype (f16/bf16); Fulcrum's kvFormat F16/BF16 maps to it.
  return /^(F16|BF16|F32)$/i.test(model.kvFormat) ? 'auto' : model.kvFormat.toUpperCase().startsWith('Q8') ? 'fp8' : 'auto';
}

function vllmCommand(modelPath: string, model: ModelShape, plans: Plan[], pp: number): { args: string[]; unsupported: string[] } {
  const unsupported: string[] = [];
  const w = plans[0]!.workload;
  const offloadBytes = Math.max(...plans.map((p) => offGpuLayers(p) * layerWeightBytes(model)));
  const args = ['vllm', 'serve', modelPath, '--tensor-parallel-size', '1', '--pipeline-parallel-size', String(pp),
    '--max-model-len', String(w.prompt + w.gen), '--max-num-seqs', String(Math.max(1, w.batch)), '--kv-cache-dtype', kvDtype(model)];
  if (offloadBytes > 0) args.push('--cpu-offload-gb', String(Math.ceil(offloadBytes / GiB)));
  // Host-memory KV (Fulcrum places KV there): vLLM's swap space is where preempted KV goes.
  const hostKv = plans.some((p) => p.stages.decode.layers.some((l) => l.kv.device !== 'gpu'));
  if (hostKv) {
    args.push('--swap-space', String(Math.max(1, Math.ceil(Math.max(...plans.map((p) => p.memory.hostBytes)) / GiB / 4))));
    unsupported.push('KV cache in host memory during decode: vLLM keeps the KV in VRAM; --swap-space only holds preempted sequences');
  }
  if (plans.some((p) => p.stages.decode.layers.some((l) => l.ops.some((o) => o.device === 'cpu')))) unsupported.push('ops computed on the CPU: vLLM computes every layer on the GPU (--cpu-offload-gb streams the weights back instead)');
  if (model.source.kind !== 'gguf' || !modelPath.endsWith('.gguf')) unsupported.push(`model: give vLLM the Hugging Face repository of ${model.name}; Fulcrum only knows its shape`);
  return { args, unsupported };
}

export function exportVllmSingle(plan: Plan, model: ModelShape, modelPath: string): EngineExport {
  const { args, unsupported } = vllmCommand(modelPath, model, [plan], 1);
  return { engine: 'vllm', commands: [args.map(quote).join(' ')], unsupported };
}

export function exportOllamaSingle(plan: Plan, modelPath: string, threads: number): EngineExport {
  const l = exportLlamaCpp(plan);
  const w = plan.workload;
  const unsupported: string[] = [];
  let ngl = l.args[l.args.indexOf('-ngl') + 1]!;
  if (hasExpertPlacement(plan)) {
    // MoE: the llama.cpp export's Modelfile count (layers whose experts stay in VRAM; see there).
    ngl = /PARAMETER num_gpu (\d+)/.exec(l.ollama.join('\n'))![1]!;
  } else if (l.args.includes('-ot') || l.args.includes('-nkvo')) {
    // llama.cpp's -ngl there counts layers whose tensors -ot sends back to the CPU; without -ot
    // that count would load them all into VRAM. Only the layers the plan keeps in VRAM go there.
    const resident = plan.stages.decode.layers.filter((x) => x.weights === 'gpu').length;
    ngl = String(resident);
    unsupported.push(`tensor overrides (-ot) and -nkvo of the llama.cpp export have no Modelfile parameter: num_gpu ${resident} counts the layers whose weights the plan keeps in VRAM (Ollama offloads the last ${resident}); the others run on the CPU instead of being streamed to the GPU`);
  }
  const lines = [`FROM ${modelPath}`, `PARAMETER num_gpu ${ngl}`, `PARAMETER num_ctx ${w.prompt + w.gen}`, `PARAMETER num_thread ${threads}`];
  if (w.batch > 1) unsupported.push(`batch ${w.batch}: parallel requests are the server's OLLAMA_NUM_PARALLEL environment variable, not a Modelfile parameter`);
  // The llama.cpp export's own note on -ot/-nkvo for Ollama says less than the one above.
  return { engine: 'ollama', commands: lines, unsupported: [...unsupported, ...l.unsupported.filter((u) => !u.startsWith('Ollama: tensor overrides'))] };
}

export function exportVllmCluster(cp: ClusterPlan, model: ModelShape, modelPath: string): EngineExport {
  const { args, unsupported } = vllmCommand(modelPath, model, cp.stages.map((s) => s.plan), cp.stages.length);
  const sizes = cp.stages.map((s) => s.endLayer - s.firstLayer);
  const even = sizes.every((n) => Math.abs(n - sizes[0]!) <= 1);
  const cmds = [`# on every host: one Ray cluster (ray start --head on host 0, ray start --address=${hostAddress(cp, 0)}:6379 on the others)`];
  if (!even) cmds.push(`export VLLM_PP_LAYER_PARTITION=${sizes.join(',')}`);
  cmds.push(args.map(quote).join(' '));
  return { engine: 'vllm', commands: cmds, unsupported };
}

/** A host's address from the cluster file, else a placeholder the user replaces (HOST1, …). */
function hostAddress(cp: ClusterPlan, host: number): string {
  return cp.addresses?.[host] ?? `HOST${host}`;
}

export function exportLlamaCppCluster(cp: ClusterPlan, modelPath: string): EngineExport {
  const unsupported: string[] = [];
  const remotes = cp.stages.slice(1).map((s) => `${hostAddress(cp, s.host)}:${DEFAULT_RPC_PORT}`);
  const cmds = cp.stages.slice(1).map((s) => `# on host ${s.host} (${s.hardware}): rpc-server -H 0.0.0.0 -p ${DEFAULT_RPC_PORT}`);
  // Host 0 is the main host: llama.cpp keeps its first (N - ngl) layers on the main host's CPU,
  // which is where host 0's plan keeps its off-GPU layers (the first ones). Remote hosts run
  // all their layers on their accelerators.
  const n = cp.stages.map((s) => s.endLayer - s.firstLayer);
  const off0 = offGpuLayers(cp.stages[0]!.plan);
  const ngl = n.reduce((a, b) => a + b, 0) - off0;
  // -ts: share of the GPU layers per device, in llama.cpp's device order (local GPU, then RPC servers).
  const ts = [n[0]! - off0, ...n.slice(1)].join(',');
  const w = cp.stages[0]!.plan.workload;
  const args = ['llama-server', '-m', modelPath, '--rpc', remotes.join(','), '-ngl', String(ngl), '--tensor-split', ts, '-c', String((w.prompt + w.gen) * Math.max(1, w.batch))];
  if (w.batch > 1) args.push('-np', String(w.batch));
  cmds.push(`# on host 0 (${cp.stages[0]!.hardware}):`, args.map(quote).join(' '));
  for (const s of cp.stages.slice(1)) {
    const off = offGpuLayers(s.plan);
    if (off > 0) unsupported.push(`host ${s.host}: ${off} of its layers kept in host memory: an rpc-server exposes the host's accelerators (its CPU only when it has none), so a remote host's CPU/GPU split is lost (the flags put all its layers on its GPU); a second rpc-server with --device CPU on another port could hold them, with --tensor-split extended by hand`);
  }
  unsupported.push('--tensor-split order assumes llama-server lists the local GPU before the RPC devices: check with --list-devices');
  return { engine: 'llama.cpp', commands: cmds, unsupported };
}

export function exportOllamaCluster(cp: ClusterPlan): EngineExport {
  return { engine: 'ollama', commands: [], unsupported: [`Ollama runs on one host: it cannot split ${cp.model} over ${cp.stages.length} hosts (use the llama.cpp RPC or vLLM export)`] };
}

export function formatEngineExport(e: EngineExport, title: string): string {
  const lines = [`# ${e.engine}: ${title}`, ...e.commands, ''];
  if (e.unsupported.length) lines.push(`# Not expressible in ${e.engine}:`, ...e.unsupported.map((u) => `#  - ${u}`), '');
  return lines.join('\n');
}
