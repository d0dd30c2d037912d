// Predicted against measured, per policy: every policy's plan executed on this machine's
// devices (the loopback accelerator, with a link capped to resemble PCIe relative to this CPU:
// 0.4 × its 1-thread copy bandwidth, see engine/runtime/devices.ts), decode step time and per-layer time as the plan predicts
// them and as the executor's traces measure them. A benchmark, not a test: it prints.
//
// Run: npm run bench:plans [-- --model FILE] [--vram 40%|BYTES] [--prompt 512] [--gen 16] [--threads 1] [--device loopback|vulkan]
// With --device vulkan the plans are made with the profile's measurement of the Vulkan device
// (its own kernels, copies and submissions) and run on it.
import os from 'node:os';
import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf/index';
import { readHparams } from '../../engine/model/hparams';
import { getProfile } from '../../engine/hardware/profiler';
import { nativeKernels } from '../../engine/native/model';
import { parseBytes } from '../../engine/plan/api';
import { Engine } from '../../engine/runtime/engine';
import { defaultLinkGBps } from '../../engine/runtime/devices';
import { stepBreakdown } from '../../engine/runtime/trace';
import { argmax } from '../../engine/runtime/sampler';
import { BENCH_SHAPES, benchModelFile } from './bench-models';

const POLICIES = ['cpu-only', 'gpu-only', 'layer-split', 'split-points', 'lia', 'kvpr', 'neo', 'apex', 'auto'];

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] ?? NaN; };

async function main(): Promise<void> {
  const file = arg('model', '') || benchModelFile(BENCH_SHAPES[0]!, GgmlType.Q8_0);
  const prompt = Number(arg('prompt', '512'));
  const gen = Number(arg('gen', '16'));
  const threads = Number(arg('threads', '1'));
  const weights = readGguf(file).tensors.reduce((s, t) => s + t.byteSize, 0);
  const nVocab = Math.min(31001, readHparams(readGguf(file)).nVocab);
  const vramArg = arg('vram', '40%');
  const vram = vramArg.endsWith('%') ? Math.round((weights * Number(vramArg.slice(0, -1))) / 100) : parseBytes(vramArg, '--vram');
  const device = arg('device', 'loopback') as 'loopback' | 'vulkan';
  if (device !== 'loopback' && device !== 'vulkan') throw new Error(`--device must be loopback or vulkan, got ${device}`);
  const { profile } = await getProfile({ quick: true });
  const link = defaultLinkGBps(profile);
  process.stdout.write(`CPU: ${os.cpus()[0]?.model.trim()} (${nativeKernels().isaLevel()} kernels, ${nativeKernels().physicalCores()} physical cores); engine threads ${threads}, loopback threads 1\n`);
  if (device === 'vulkan') process.stdout.write(`device: ${profile.gpu?.name ?? 'no Vulkan device in the profile'}; link ${profile.link?.h2dPinnedGBps ?? '?'} GB/s host→device (measured)\n`);
  process.stdout.write(`model ${file} (${(weights / 2 ** 20).toFixed(1)} MiB of weights); ${device} VRAM ${(vram / 2 ** 20).toFixed(1)} MiB${device === 'loopback' ? `; link cap ${link.toFixed(1)} GB/s (0.4 × 1-thread copy ${(link / 0.4).toFixed(1)} GB/s)` : ''}\n`);
  process.stdout.write(`workload: batch 1, prompt ${prompt}, decode ${gen} tokens measured (median step)\n\n`);
  process.stdout.write('policy        ran as        split                                        | step ms  predicted  measured  ratio | layer |err| mean  max | lanes busy ms (cpu/dev/h2d/d2h) overlap\n');
  const measured: { policy: string; chosen: string; ms: number }[] = [];
  for (const policy of POLICIES) {
    let engine: Engine;
    try {
      engine = await Engine.load(file, {
        threads, contextLength: prompt + gen + 64, device, vramBytes: vram, policy, hardware: profile, linkGBps: link, deviceThreads: 1,
        workload: { batch: 1, prompt, gen: gen * 2, vramBytes: vram },
      });
    } catch (e) {
      process.stdout.write(`${policy.padEnd(13)} does not apply: ${(e as Error).message.slice(0, 140)}\n`);
      continue;
    }
    try {
      const ex = engine.execution;
      const plan = ex.plan!;
      const tokens = Array.from({ length: prompt }, (_, i) => 1 + ((i * 7919) % (nVocab - 1)));
      let logits = await engine.logits(tokens);
      engine.setTracing(true);
      for (let i = 0; i < gen; i++) {
        tokens.push(argmax(logits));
        logits = await engine.logits(tokens);
      }
      const trace = engine.takeTrace();
      const steps = [...new Set(trace.events.map((e) => e.step))];
      const nLayers = plan.stages.decode.layers.length;
      // Median step by wall time; the per-layer breakdown averaged over the steps.
      const stepMs = median(steps.map((s) => stepBreakdown(trace, [s], nLayers).stepMs));
      const b = stepBreakdown(trace, steps, nLayers);
      const errs = plan.stages.decode.layers.map((l, i) => Math.abs(b.layerMs[i]! - l.predictedMs) / Math.max(1e-9, l.predictedMs));
      const predicted = plan.predicted.stepMs;
      process.stdout.write(
        `${policy.padEnd(13)} ${plan.chosenPolicy.padEnd(13)} ${(ex.fallback ? `FELL BACK: ${ex.fallback}` : ex.split).slice(0, 44).padEnd(44)} | ` +
        `${predicted.toFixed(2).padStart(9)} ${stepMs.toFixed(2).padStart(9)} ${(stepMs / predicted).toFixed(2).padStart(6)} | ` +
        `${(100 * errs.reduce((a, c) => a + c, 0) / errs.length).toFixed(0).padStart(9)}% ${(100 * Math.max(...errs)).toFixed(0).padStart(4)}% | ` +
        `${[b.perLane.cpu, b.perLane.device, b.perLane.h2d, b.perLane.d2h].map((v) => v.toFixed(2)).join('/').padStart(26)} ${b.overlapMs.toFixed(2)}\n`,
      );
      if (!ex.fallback) measured.push({ policy, chosen: plan.chosenPolicy, ms: stepMs });
      if (process.argv.includes('--layers')) {
        plan.stages.decode.layers.forEach((l, i) => process.stdout.write(`    layer ${String(i).padStart(2)} predicted ${l.predictedMs.toFixed(3)} ms measured ${b.layerMs[i]!.toFixed(3)} ms\n`));
      }
    } finally {
      engine.dispose();
    }
  }
  const auto = measured.find((m) => m.policy === 'auto');
  const fastest = measured.filter((m) => m.policy !== 'auto').sort((a, b) => a.ms - b.ms)[0];
  if (auto && fastest) {
    process.stdout.write(`\nauto chose ${auto.chosen}: ${auto.ms.toFixed(2)} ms/step; fastest executed: ${fastest.policy} ${fastest.ms.toFixed(2)} ms/step (auto within ${(100 * (auto.ms / fastest.ms - 1)).toFixed(0)} %)\n`);
  }
}

main().catch((e) => { process.stderr.write(`${(e as Error).stack}\n`); process.exitCode = 1; });
