// Issue 27 item 2: vLLM, llama.cpp RPC and Ollama exports of multi-host and single-host plans.
// Every flag the exports print must be in that engine's own argument list (fixtures below).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseClusterSpec } from '../../engine/hardware/cluster';
import { modelPreset } from '../../engine/model/model-presets';
import { parseWorkload, planRequest } from '../../engine/plan/api';
import { exportLlamaCppCluster, exportOllamaCluster, exportOllamaSingle, exportVllmCluster, exportVllmSingle } from '../../engine/plan/multihost/export';
import { planCluster } from '../../engine/plan/multihost/pipeline';

// vllm-project/vllm vllm/engine/arg_utils.py (EngineArgs fields / add_cli_args) and
// vllm/envs.py (VLLM_PP_LAYER_PARTITION, read by get_pp_indices in vllm/distributed/utils.py).
const VLLM_FLAGS = new Set(['--tensor-parallel-size', '--pipeline-parallel-size', '--cpu-offload-gb', '--swap-space', '--max-num-seqs', '--max-model-len', '--kv-cache-dtype']);
const VLLM_KV_DTYPES = new Set(['auto', 'fp8', 'fp8_e5m2', 'fp8_e4m3']);
// ggml-org/llama.cpp common/arg.cpp (-m, --rpc, -ngl, -ts/--tensor-split, -c, -np) and
// tools/rpc/README.md + tools/rpc/rpc-server.cpp (-H host, -p port, --device).
const LLAMA_SERVER_FLAGS = new Set(['-m', '--rpc', '-ngl', '--tensor-split', '-ts', '-c', '-np']);
const RPC_SERVER_FLAGS = new Set(['-H', '-p', '--device']);
// ollama/ollama api/types.go (Options: num_ctx, num_gpu, num_thread) and docs/modelfile.mdx (FROM, PARAMETER).
const OLLAMA_PARAMETERS = new Set(['num_ctx', 'num_gpu', 'num_thread']);

function flagsOf(line: string): string[] { return line.split(/\s+/).filter((w) => /^-/.test(w)); }
function commandLine(lines: string[], program: string): string {
  const l = lines.find((x) => x.startsWith(`${program} `) || x.includes(`: ${program} `));
  assert.ok(l, `no ${program} line in ${lines.join('\n')}`);
  return l.slice(l.indexOf(program));
}
function valueOf(line: string, flag: string): string { const w = line.split(/\s+/); return w[w.indexOf(flag) + 1]!; }

const W = parseWorkload('batch=1,prompt=4096,gen=256');
const model = modelPreset('llama-3.1-70b');
const even = planCluster(model, parseClusterSpec('2x(rtx4090+ryzen9-7950x)@10GbE'), W);
const uneven = planCluster(model, parseClusterSpec('(h100-pcie+ryzen9-7950x),(a10+ryzen9-7950x)@100GbE'), W);

test('vLLM: pipeline size = hosts, flags from vLLM\'s own list, uneven split via VLLM_PP_LAYER_PARTITION', () => {
  const e = exportVllmCluster(even, model, 'meta-llama/Llama-3.1-70B');
  const line = commandLine(e.commands, 'vllm serve');
  for (const f of flagsOf(line)) assert.ok(VLLM_FLAGS.has(f), `${f} is not a vLLM flag`);
  assert.equal(valueOf(line, '--pipeline-parallel-size'), '2');
  assert.equal(valueOf(line, '--max-model-len'), '4352');
  assert.ok(VLLM_KV_DTYPES.has(valueOf(line, '--kv-cache-dtype')));
  assert.ok(!e.commands.some((c) => c.includes('VLLM_PP_LAYER_PARTITION')), 'even split needs no partition');
  const u = exportVllmCluster(uneven, model, 'meta-llama/Llama-3.1-70B');
  const sizes = uneven.stages.map((s) => s.endLayer - s.firstLayer);
  assert.notEqual(sizes[0], sizes[1]);
  assert.ok(u.commands.includes(`export VLLM_PP_LAYER_PARTITION=${sizes.join(',')}`));
});

test('llama.cpp RPC: one rpc-server per remote host, --rpc list and --tensor-split from the plan', () => {
  const e = exportLlamaCppCluster(uneven, 'model.gguf');
  const server = commandLine(e.commands, 'llama-server');
  for (const f of flagsOf(server)) assert.ok(LLAMA_SERVER_FLAGS.has(f), `${f} is not a llama-server flag`);
  assert.equal(valueOf(server, '--rpc'), 'HOST1:50052');
  const rpc = e.commands.filter((c) => c.includes('rpc-server '));
  assert.equal(rpc.length, 1);
  for (const f of flagsOf(rpc[0]!.slice(rpc[0]!.indexOf('rpc-server')))) assert.ok(RPC_SERVER_FLAGS.has(f), `${f} is not an rpc-server flag`);
  const ts = valueOf(server, '--tensor-split').split(',').map(Number);
  const ngl = Number(valueOf(server, '-ngl'));
  assert.equal(ts.reduce((a, b) => a + b, 0), ngl, 'the split shares the GPU layers');
  assert.equal(ts[1], uneven.stages[1]!.endLayer - uneven.stages[1]!.firstLayer);
});

test('Ollama: single host Modelfile with num_gpu/num_ctx/num_thread; clusters are refused in words', () => {
  const plan = planRequest({ model: 'qwen2.5-coder-7b', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=256' });
  const e = exportOllamaSingle(plan, './qwen.gguf', 16);
  assert.equal(e.commands[0], 'FROM ./qwen.gguf');
  for (const l of e.commands.slice(1)) {
    const [kw, name] = l.split(' ');
    assert.equal(kw, 'PARAMETER');
    assert.ok(OLLAMA_PARAMETERS.has(name!), `${name} is not an Ollama option`);
  }
  assert.ok(e.commands.includes('PARAMETER num_ctx 8448'));
  assert.ok(e.commands.includes('PARAMETER num_thread 16'));
  const c = exportOllamaCluster(even);
  assert.equal(c.commands.length, 0);
  assert.match(c.unsupported[0]!, /one host/);
});

test('Ollama: num_gpu counts only the layers the plan keeps in VRAM when the llama.cpp flags need tensor overrides', () => {
  // 70B Q4_K on a 24 GB GPU: the plan streams some layers' weights; llama.cpp gets -ngl 81 and -ot
  // keeping those tensors on the CPU, but a Modelfile has no -ot: num_gpu 81 would load every layer
  // into VRAM.
  const plan = planRequest({ model: 'llama-3.1-70b:Q4_K', hardware: 'rtx4090+ryzen9-7950x', workload: 'batch=1,prompt=2048,gen=128' });
  const resident = plan.stages.decode.layers.filter((l) => l.weights === 'gpu').length;
  assert.ok(resident > 0 && resident < plan.model.nLayers, `the plan splits (${resident} of ${plan.model.nLayers} resident)`);
  const e = exportOllamaSingle(plan, './llama.gguf', 16);
  assert.ok(e.commands.includes(`PARAMETER num_gpu ${resident}`), e.commands.join('\n'));
  assert.ok(e.unsupported.some((u) => /num_gpu \d+ counts the layers whose weights the plan keeps in VRAM/.test(u)), e.unsupported.join('\n'));
});

test('vLLM single host: pipeline 1 and a CPU offload when the plan keeps layers off the GPU', () => {
  const plan = planRequest({ model: 'qwen2.5-coder-32b', hardware: 'rtx4090+ryzen9-7950x', workload: 'batch=1,prompt=4096,gen=128' });
  const e = exportVllmSingle(plan, modelPreset('qwen2.5-coder-32b'), 'Qwen/Qwen2.5-Coder-32B');
  const line = commandLine(e.commands, 'vllm serve');
  for (const f of flagsOf(line)) assert.ok(VLLM_FLAGS.has(f), `${f} is not a vLLM flag`);
  assert.equal(valueOf(line, '--pipeline-parallel-size'), '1');
  const off = plan.stages.decode.layers.filter((l) => l.weights !== 'gpu').length;
  assert.equal(line.includes('--cpu-offload-gb'), off > 0);
});

test('Ollama for an MoE plan: num_gpu counts the layers whose experts stay in VRAM (a Modelfile cannot keep experts in host memory)', () => {
  // Qwen3-Coder-30B-A3B on an 8 GB laptop GPU: the plan keeps the experts of layers 0–27 (of 48)
  // in host memory; llama.cpp gets -ngl 49 --n-cpu-moe 28, but num_gpu 49 would load every
  // expert into 8 GB.
  const plan = planRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=2048,gen=128' });
  const e = exportOllamaSingle(plan, './qwen3-coder.gguf', 16);
  const numGpu = Number(/PARAMETER num_gpu (\d+)/.exec(e.commands.join('\n'))![1]);
  assert.ok(numGpu > 0 && numGpu < plan.model.nLayers, `num_gpu ${numGpu}`);
  assert.ok(e.unsupported.some((u) => /num_gpu \d+ counts the layers whose experts the plan keeps in VRAM/.test(u)), e.unsupported.join('\n'));
});
