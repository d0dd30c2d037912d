// `fulcrum plan --export llama.cpp`: the flags are read back the way llama.cpp applies them
// (-ngl offloads the last N layers and, above n_layer, the output; -ot REGEX=CPU keeps matching
// tensors in host memory; -nkvo keeps all KV in host memory), and the resulting placement of
// every weight matrix and KV cache must equal the plan's, except for what the export lists as
// not expressible.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { planRequest } from '../../engine/plan/api';
import { exportLlamaCpp } from '../../engine/plan/export-llamacpp';
import type { OpPlan, Plan } from '../../engine/plan/types';
import { repoRoot } from '../helpers/shared';

const TENSOR: Record<string, string> = { q: 'attn_q', k: 'attn_k', v: 'attn_v', out: 'attn_output', gate: 'ffn_gate', up: 'ffn_up', down: 'ffn_down' };
const SMALL_VRAM = { model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=64,vram=4G' };

/** Where llama.cpp puts each tensor and KV cache, given the flags. */
function llamaPlacement(args: string[], nLayers: number) {
  const ngl = Number(args[args.indexOf('-ngl') + 1]);
  const overrides: RegExp[] = [];
  args.forEach((a, i) => { if (a === '-ot') overrides.push(new RegExp(args[i + 1]!.replace(/=CPU$/, ''))); });
  const nkvo = args.includes('-nkvo');
  // llama.cpp: i_gpu_start = max(n_layer - n_gpu_layers, 0); the output is "layer" n_layer.
  const gpuFrom = Math.max(0, nLayers - ngl);
  const tensorDevice = (name: string, layer: number | 'output'): 'cpu' | 'gpu' => {
    const onGpuByNgl = layer === 'output' ? ngl > nLayers : layer >= gpuFrom;
    return onGpuByNgl && !overrides.some((r) => r.test(name)) ? 'gpu' : 'cpu';
  };
  const kvDevice = (layer: number): 'cpu' | 'gpu' => (!nkvo && layer >= gpuFrom ? 'gpu' : 'cpu');
  return { tensorDevice, kvDevice };
}

function planned(o: OpPlan): 'cpu' | 'gpu' {
  return o.device === 'gpu' && o.weights === 'gpu' ? 'gpu' : 'cpu';
}

function checkAgainstPlan(plan: Plan): ReturnType<typeof exportLlamaCpp> {
  const e = exportLlamaCpp(plan);
  const stage = plan.stages.decode;
  const n = stage.layers.length;
  const { tensorDevice, kvDevice } = llamaPlacement(e.args, n);
  for (const l of stage.layers) {
    for (const o of l.ops) {
      const t = TENSOR[o.kind];
      if (!t || o.weights === undefined) continue;
      assert.equal(tensorDevice(`blk.${l.index}.${t}.weight`, l.index), planned(o), `L${l.index} ${o.name} (${e.commandLine})`);
    }
    if (!e.unsupported.some((u) => u.startsWith('KV cache'))) assert.equal(kvDevice(l.index), l.kv.device, `KV of L${l.index} (${e.commandLine})`);
  }
  assert.equal(tensorDevice('output.weight', 'output'), planned(stage.head), `LM head (${e.commandLine})`);
  const w = plan.workload;
  assert.equal(Number(e.args[e.args.indexOf('-c') + 1]), (w.prompt + w.gen) * w.batch);
  return e;
}

test('layer-split: -ngl is the number of GPU layers (the last ones), nothing left unexpressed', () => {
  const plan = planRequest({ ...SMALL_VRAM, policy: 'layer-split' });
  const e = checkAgainstPlan(plan);
  const gpuLayers = plan.stages.decode.layers.filter((l) => l.ops.every((o) => o.weights === undefined || o.device === 'gpu')).length;
  assert.ok(gpuLayers > 0 && gpuLayers < 32, 'the plan splits the layers');
  assert.deepEqual(e.args.slice(0, 2), ['-ngl', String(gpuLayers)]);
  assert.ok(!e.args.includes('-ot'));
  assert.deepEqual(e.unsupported, []);
  assert.ok(e.ollama.includes(`PARAMETER num_gpu ${gpuLayers}`));
});

test('gpu-only when everything fits: -ngl covers the output layer too', () => {
  const plan = planRequest({ ...SMALL_VRAM, workload: 'batch=1,prompt=2048,gen=64', policy: 'gpu-only' });
  const e = checkAgainstPlan(plan);
  assert.deepEqual(e.args.slice(0, 2), ['-ngl', '33']);
});

test('cpu-only: -ngl 0', () => {
  const e = checkAgainstPlan(planRequest({ ...SMALL_VRAM, policy: 'cpu-only' }));
  assert.deepEqual(e.args.slice(0, 2), ['-ngl', '0']);
});

test('LIA (GPU layers first, CPU layers last): -ot regexes send exactly the planned CPU tensors to the CPU', () => {
  const plan = planRequest({ ...SMALL_VRAM, policy: 'lia' });
  const e = checkAgainstPlan(plan);
  assert.ok(e.args.includes('-ot'), e.commandLine);
});

test('streamed weights (split-points, KVPR) are listed as not expressible', () => {
  for (const policy of ['split-points', 'kvpr']) {
    const e = checkAgainstPlan(planRequest({ ...SMALL_VRAM, policy }));
    assert.ok(e.unsupported.some((u) => /streamed to the GPU every step/.test(u)), `${policy}: ${e.unsupported.join(' / ')}`);
  }
});

test('batch > 1 sets -np and a context for all sequences', () => {
  const e = exportLlamaCpp(planRequest({ ...SMALL_VRAM, workload: 'batch=4,prompt=1024,gen=64', policy: 'layer-split' }));
  assert.equal(e.args[e.args.indexOf('-np') + 1], '4');
  assert.equal(e.args[e.args.indexOf('-c') + 1], String(4 * 1088));
});

test('CLI: plan --export llama.cpp prints the flags; an unknown format is a usage error', () => {
  const run = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'engine/cli.ts'), 'plan',
    '--model', SMALL_VRAM.model, '--hardware', SMALL_VRAM.hardware, '--workload', SMALL_VRAM.workload, '--policy', 'layer-split', ...args],
  { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 });
  const ok = run('--export', 'llama.cpp');
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /^-ngl \d+ -c 8256$/m);
  assert.match(ok.stdout, /PARAMETER num_gpu \d+/);
  const json = run('--export', 'llama.cpp', '--json');
  assert.equal(json.status, 0, json.stderr);
  assert.deepEqual(Object.keys(JSON.parse(json.stdout)).sort(), ['args', 'commandLine', 'ollama', 'unsupported']);
  const bad = run('--export', 'tgi');
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /--export: unknown format 'tgi' \(known: llama\.cpp, vllm, ollama\)/);
});

test('Ollama from the llama.cpp export: with tensor overrides, num_gpu counts the layers kept in VRAM (a Modelfile has no -ot)', () => {
  const plan = planRequest({ model: 'llama-3.1-70b:Q4_K', hardware: 'rtx4090+ryzen9-7950x', workload: 'batch=1,prompt=2048,gen=128', policy: 'gpu-only' });
  const e = exportLlamaCpp(plan);
  assert.ok(e.args.includes('-ot'), e.commandLine);
  const resident = plan.stages.decode.layers.filter((l) => l.ops.every((o) => o.weights === undefined || (o.device === 'gpu' && o.weights === 'gpu'))).length;
  assert.ok(resident < plan.model.nLayers, `${resident} of ${plan.model.nLayers} layers resident`);
  assert.ok(e.ollama.includes(`PARAMETER num_gpu ${resident}`), e.ollama.join('\n'));
  assert.ok(!e.ollama.includes(`PARAMETER num_gpu ${plan.model.nLayers + 1}`));
});
