// `npm run bench:vulkan`: Fulcrum's Vulkan path against llama.cpp's Vulkan backend
// (node-llama-cpp's @node-llama-cpp/linux-x64-vulkan) on the same Vulkan device and the same
// files: prefill and decode tokens/s with the whole model on the GPU, and whether both produce
// the same greedy tokens from the same prompt ids. On lavapipe (CI's software Vulkan device) only
// the ratio means anything; both run with LP_NUM_THREADS=1 and one CPU thread, and llama.cpp is
// shown the CPU-type device with GGML_VK_VISIBLE_DEVICES=0 (it skips such devices by default).
// A benchmark, not a test: it prints a table and writes JSON under bench-results/.
//
// Options: --prompt N (default 64), --gen N (default 32), --no-peer.
process.env.LP_NUM_THREADS ??= '1';
process.env.GGML_VK_VISIBLE_DEVICES ??= '0';

import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { parseArgs } from '../../engine/cli/command';
import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf';
import { readHparams } from '../../engine/model/hparams';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { packageRoot } from '../../engine/native/addon';
import type { NativeModel } from '../../engine/native/model';
import { benchTokens } from '../../engine/runtime/bench';
import { Engine } from '../../engine/runtime/engine';
import { argmax } from '../../engine/runtime/sampler';
import { vulkanProbe } from '../../engine/hardware/vulkan-profile';
import { thisMachineProfile } from '../../engine/profile/profiler';
import { sharedPath } from '../helpers/shared';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;
const dynamicImport = new Function('m', 'return import(m)') as (m: string) => Promise<Any>;

interface Side { prefill_tok_s: number; decode_tok_s: number; tokens: number[] }

async function fulcrum(file: string, prompt: number[], gen: number): Promise<Side> {
  const engine = await Engine.load(file, { threads: 1, contextLength: 512, device: 'vulkan', policy: 'gpu-only', hardware: thisMachineProfile });
  try {
    if (engine.execution.device !== 'vulkan') throw new Error(`not on the GPU: ${engine.execution.deviceReason} ${engine.execution.fallback ?? ''}`);
    const m = (engine as unknown as { native: NativeModel }).native;
    await m.evalAsync(Int32Array.of(prompt[0]!), 0);  // warm-up: first submissions, pages
    m.clearKv(0);
    const t0 = performance.now();
    let logits: Float32Array = new Float32Array();
    for (let p = 0; p < prompt.length; p += 64) logits = await m.evalAsync(Int32Array.from(prompt.slice(p, p + 64)), p);
    const t1 = performance.now();
    const tokens: number[] = [];
    let pos = prompt.length;
    for (let i = 0; i < gen; i++) {
      const next = argmax(logits);
      tokens.push(next);
      if (i + 1 < gen) logits = await m.evalAsync(Int32Array.of(next), pos++);
    }
    const t2 = performance.now();
    return { prefill_tok_s: (prompt.length / (t1 - t0)) * 1000, decode_tok_s: ((gen - 1) / (t2 - t1)) * 1000, tokens };
  } finally {
    engine.dispose();
  }
}

async function llamaCpp(file: string, prompt: number[], gen: number): Promise<Side> {
  const nlc = await dynamicImport('node-llama-cpp');
  const llama = await nlc.getLlama({ gpu: 'vulkan', build: 'never', logLevel: nlc.LlamaLogLevel.error });
  const devices: string[] = await llama.getGpuDeviceNames();
  if (!devices.length) throw new Error('llama.cpp found no Vulkan device');
  const model = await llama.loadModel({ modelPath: file, gpuLayers: 'max' });
  const context = await model.createContext({ contextSize: 512, batchSize: 64, threads: 1, flashAttention: false });
  try {
    const seq = context.getSequence();
    // Warm-up: llama.cpp compiles its pipelines on first use (seconds on lavapipe's JIT).
    await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, 8));
    for await (const _t of seq.evaluate([prompt[8]!], { temperature: 0 })) break;
    await seq.clearHistory();
    const t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
    const t1 = performance.now();
    const tokens: number[] = [];
    for await (const t of seq.evaluate([prompt[prompt.length - 1]!], { temperature: 0 })) {
      tokens.push(t as number);
      if (tokens.length >= gen) break;
    }
    const t2 = performance.now();
    // The last prompt token is evaluated with the first decode step; count it there.
    return { prefill_tok_s: ((prompt.length - 1) / (t1 - t0)) * 1000, decode_tok_s: (gen / (t2 - t1)) * 1000, tokens };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

(async () => {
  const args = parseArgs(process.argv.slice(2), ['prompt', 'gen'], ['no-peer']);
  const promptN = Number(args.options.get('prompt') ?? 64), gen = Number(args.options.get('gen') ?? 32);
  const probe = vulkanProbe();
  console.log(`CPU: ${os.cpus()[0]?.model} · Vulkan: ${probe.available ? `${probe.name} (${probe.type})` : `none (${probe.reason})`} · LP_NUM_THREADS=${process.env.LP_NUM_THREADS} · 1 engine thread`);
  if (!probe.available) process.exit(1);
  const dir = path.join(os.tmpdir(), 'fulcrum-bench-vulkan');
  mkdirSync(dir, { recursive: true });
  const models: [string, string][] = [['stories260K F32', sharedPath('models', 'stories260K.gguf')]];
  for (const [name, type] of [['Q8_0', GgmlType.Q8_0], ['Q4_0', GgmlType.Q4_0], ['Q4_K', GgmlType.Q4_K]] as const) {
    const file = path.join(dir, `llama-${name}.gguf`);
    writeSyntheticModel(file, { architecture: 'llama', nLayers: 4, nEmbd: 256, nHeads: 8, nKvHeads: 4, nFf: 768, nVocab: 2048, contextLength: 512, seed: 11, weightType: type });
    models.push([`synthetic llama ${name} (${(readGguf(file).tensors.reduce((s, t) => s + t.byteSize, 0) / 2 ** 20).toFixed(1)} MiB)`, file]);
  }
  const rows: Record<string, unknown>[] = [];
  console.log('| model | Fulcrum prefill / decode tok/s | llama.cpp prefill / decode tok/s | ratio prefill / decode | same greedy tokens |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const [name, file] of models) {
    const prompt = benchTokens(promptN, readHparams(readGguf(file)).nVocab);
    const f = await fulcrum(file, prompt, gen);
    let l: Side | undefined, err: string | undefined;
    if (!args.options.has('no-peer')) {
      try { l = await llamaCpp(file, prompt, gen); } catch (e) { err = (e as Error).message; }
    }
    const same = l ? f.tokens.findIndex((t, i) => t !== l!.tokens[i]) : -2;
    console.log(`| ${name} | ${f.prefill_tok_s.toFixed(1)} / ${f.decode_tok_s.toFixed(1)} | ${l ? `${l.prefill_tok_s.toFixed(1)} / ${l.decode_tok_s.toFixed(1)}` : err ?? 'not run'} | ${l ? `${(f.prefill_tok_s / l.prefill_tok_s).toFixed(2)} / ${(f.decode_tok_s / l.decode_tok_s).toFixed(2)}` : '-'} | ${same === -1 ? `yes (${gen})` : same === -2 ? '-' : `first ${same} of ${gen}`} |`);
    rows.push({ model: name, fulcrum: f, llama_cpp: l, error: err });
  }
  const out = path.join(packageRoot(), 'bench-results', `vulkan-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify({ cpu: os.cpus()[0]?.model, device: probe, prompt: promptN, gen, rows }, null, 2));
  console.log(`wrote ${out}`);
})().catch((e) => { console.error(e); process.exit(1); });
