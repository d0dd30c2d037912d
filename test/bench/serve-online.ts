// `npm run bench:serve -- --online`: NEO and APEX deciding live, measured against the simulator.
// The same arrivals (Poisson at --rate requests/s, or all at once with --rate inf; prompt and
// output lengths ±10 % around --prompt and --gen; seed 1) are served by the runtime scheduler on
// the loopback device (and Vulkan when one is found) with each decider — NEO's 'gpu-only' baseline
// (SwiftLLM: KV that does not fit on the device is swapped out and waits, no CPU attention), NEO
// and APEX — on the NEO/APEX placement (weights on the device, KV by request), and played by the
// online simulator (engine/plan/online/loop.ts) with the same decider, limits, slots and the plan's cost
// model.
// Measured: generated tokens per second from the first arrival to the last completion, and the
// mean per-token latency (finish − arrival) / tokens, as NEO §5.1 defines them.
// --cpu-attn-scale F adds a row 'apex ×F': APEX deciding on predictions whose CPU attention is F×
// the cost model's (the T4-like gap where its inequality (6) fails and it chooses asynchronous
// overlap), live and in the simulator alike; --cpu-request-ratio R lowers §4.2's threshold for
// launching CPU attention (8× the device's requests) for few slots.
import os from 'node:os';
import { readGguf } from '../../engine/model/gguf/index';
import { readHparams } from '../../engine/model/hparams';
import { hardwarePreset } from '../../engine/hardware/presets';
import type { HardwareProfile } from '../../engine/hardware/types';
import { resolve } from '../../engine/plan/api';
import { makeDecider, type DeciderKind } from '../../engine/plan/online/decider';
import { onlineSetup } from '../../engine/plan/online/setup';
import { runOnline } from '../../engine/plan/online/loop';
import { generateWorkload } from '../../engine/plan/online/workload';
import type { OnlineRequest } from '../../engine/plan/neo/request';
import { Engine } from '../../engine/runtime/engine';
import { LiveDecider } from '../../engine/runtime/scheduler/online';
import { ApexScheduler } from '../../engine/plan/apex/scheduler';
import { profilePredictors } from '../../engine/plan/neo/costs';
import type { OnlineDecider } from '../../engine/plan/online/decider';
import type { NativeModel } from '../../engine/native/model';
import { deviceWorkspaceBytes, resolveDevice, vulkanWorkspaceBytes } from '../../engine/runtime/devices';
import { thisMachineProfile } from '../../engine/profile/profiler';
import { sharedPath } from '../helpers/shared';
import { planHardware } from '../helpers/policy-runs';

const KINDS: DeciderKind[] = ['gpu-only', 'neo', 'apex'];

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

/** A row of the table: a decider, or APEX on predictions with its CPU attention scaled. */
interface Row { kind: DeciderKind; label: string; cpuAttnScale: number; cpuRequestRatio?: number }

/** The row's decider on `limits`: the cost model's predictors, or APEX's on scaled CPU attention. */
function deciderOf(row: Row, engine: Engine, limits: Parameters<typeof makeDecider>[1]): OnlineDecider {
  const setup = onlineSetup(resolve(engine.execution.planParams!).ctx);
  if (row.cpuAttnScale === 1) return makeDecider(row.kind, limits, setup.predictors);
  const slowCpu = { ...setup.truth, cpuAttnMs: (kv: number) => row.cpuAttnScale * setup.truth.cpuAttnMs(kv) };
  return new ApexScheduler(limits, profilePredictors(slowCpu), row.cpuRequestRatio ? { cpuRequestRatio: row.cpuRequestRatio } : {});
}

interface Measured { tokensPerS: number; perTokenMs: number; iterations: number; modes: string; cpuShare: number; swaps: number }
interface Simulated { tokensPerS: number; perTokenMs: number; iterations: number; modes: string }

const modesText = (m: Record<string, number>) => Object.entries(m).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ');

function promptOf(r: OnlineRequest, vocab: number): number[] {
  return Array.from({ length: r.promptTokens }, (_, i) => 1 + ((i * 7919 + r.id * 104729) % (vocab - 1)));
}

async function serve(engine: Engine, row: Row, reqs: OnlineRequest[], vocab: number): Promise<{ m: Measured; limits: NonNullable<ReturnType<Engine['scheduler']>['onlineDecider']>['limits'] }> {
  const kind = row.kind;
  const s = engine.scheduler({ online: { kind } });
  if (!s.onlineDecider) throw new Error(`no live decider on ${engine.execution.policy} (${engine.execution.split})`);
  if (row.cpuAttnScale !== 1) {
    const limits = s.onlineDecider.limits;
    const native = (engine as unknown as { native: NativeModel }).native;
    s.setOnline(new LiveDecider(kind, deciderOf(row, engine, limits), native, limits));
  }
  const live = s.onlineDecider!;
  // Warm-up: page the weights in (one short request through the decider).
  await s.submit({ prompt: [1, 2, 3], maxTokens: 2, temperature: 0, onlyStopIds: true, stopIds: new Set() }).result;
  const before = { ...live.stats, modes: { ...live.stats.modes } };
  const t0 = performance.now();
  let tokens = 0, latency = 0, last = t0;
  await Promise.all(reqs.map(async (r) => {
    const wait = r.arrivalMs - (performance.now() - t0);
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
    const res = await s.submit({ prompt: promptOf(r, vocab), maxTokens: r.outputTokens, temperature: 0, onlyStopIds: true, stopIds: new Set() }).result;
    const end = performance.now();
    last = Math.max(last, end);
    tokens += res.generatedTokens;
    latency += (end - t0 - r.arrivalMs) / Math.max(1, res.generatedTokens);
  }));
  const st = live.stats;
  const modes: Record<string, number> = {};
  for (const k of Object.keys(st.modes) as (keyof typeof st.modes)[]) modes[k] = st.modes[k] - before.modes[k];
  const attended = st.cpuAttended - before.cpuAttended + st.deviceAttended - before.deviceAttended;
  return {
    m: {
      tokensPerS: (tokens / (last - t0)) * 1000, perTokenMs: latency / reqs.length, iterations: st.iterations - before.iterations, modes: modesText(modes),
      cpuShare: attended > 0 ? (st.cpuAttended - before.cpuAttended) / attended : 0, swaps: st.swaps - before.swaps,
    },
    limits: live.limits,
  };
}

function simulate(engine: Engine, row: Row, reqs: OnlineRequest[], limits: Parameters<typeof makeDecider>[1], slots: number): Simulated | string {
  const params = engine.execution.planParams;
  if (!params) return 'no plan';
  const setup = onlineSetup(resolve(params).ctx);
  try {
    const r = runOnline(reqs, deciderOf(row, engine, limits), setup.truth, { maxRunning: slots });
    return { tokensPerS: r.throughputTokensPerS, perTokenMs: r.perTokenLatencyMs, iterations: r.iterations, modes: modesText(r.modes) };
  } catch (e) {
    return (e as Error).message;
  }
}

export async function onlineBench(): Promise<void> {
  const file = arg('model', sharedPath('models', 'stories260K.gguf'));
  const gguf = readGguf(file);
  const hp = readHparams(gguf);
  const weights = gguf.tensors.reduce((s, t) => s + t.byteSize, 0);
  const slots = Number(arg('parallel', '8'));
  const count = Number(arg('requests', '16'));
  const prompt = Number(arg('prompt', '48')), gen = Number(arg('gen', '32'));
  const rateText = arg('rate', 'inf');
  const rate = rateText === 'inf' ? Infinity : Number(rateText);
  const threads = Number(arg('threads', '1'));
  const repeat = Math.max(1, Number(arg('repeat', '3')));
  const ctx = Number(arg('ctx', String(Math.max(128, 2 * (prompt + gen)))));
  // Decision: the default plans with the fixed host preset the tests use (deterministic plans);
  // --hardware this plans with this machine's measured profile (profiled once, then cached).
  const hwName = arg('hardware', 'ryzen9-7950x');
  const hardware: HardwareProfile = hwName === 'this' ? await thisMachineProfile() : hardwarePreset(hwName);
  // Default device budget: the weights and the executor's workspace, plus --kv-factor × the
  // weights for KV (the smallest budgets at which NEO applies leave the device short of KV).
  const kvFactor = Number(arg('kv-factor', '0.95'));
  const rows: Row[] = KINDS.map((kind) => ({ kind, label: kind, cpuAttnScale: 1 }));
  const cpuAttnScale = Number(arg('cpu-attn-scale', '1'));
  const cpuRequestRatio = arg('cpu-request-ratio', '') ? Number(arg('cpu-request-ratio', '')) : undefined;
  if (cpuAttnScale !== 1) rows.push({ kind: 'apex', label: `apex ×${cpuAttnScale}`, cpuAttnScale, ...(cpuRequestRatio ? { cpuRequestRatio } : {}) });
  const devices: ('loopback' | 'vulkan')[] = ['loopback'];
  if (!process.argv.includes('--no-vulkan') && resolveDevice('vulkan').device === 'vulkan') devices.push('vulkan');
  const reqs = generateWorkload({ rate, count, prompt: { kind: 'uniform-10pct', mean: prompt }, output: { kind: 'uniform-10pct', mean: gen }, seed: 1 });
  process.stdout.write(`model ${file}; ${count} requests, prompt ≈${prompt}, gen ≈${gen} tokens, rate ${rateText}/s, ${slots} slots, ${threads} thread(s), median of ${repeat} runs; plans on '${hardware.name}'; load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}\n`);
  process.stdout.write('device   | decider  | measured tok/s | simulated tok/s | sim/meas | per-token ms meas / sim | CPU attn share | swaps | measured iterations (modes) | simulated iterations (modes)\n');
  for (const device of devices) {
    const vram = arg('vram', '') ? Number(arg('vram', '')) : Math.round(weights * (1 + kvFactor) + deviceWorkspaceBytes(hp, 512, true, slots) + (device === 'vulkan' ? vulkanWorkspaceBytes(hp, ctx) : 0));
    for (const row of rows) {
      const kind = row.kind;
      const policy = kind === 'apex' ? 'apex' : 'neo';
      // A preset host has no measured Vulkan device: plan it as the tests do (the loopback rates under a GPU's name).
      const planOn = device === 'vulkan' && hwName !== 'this' ? planHardware('vulkan') : hardware;
      let engine: Engine;
      try {
        engine = await Engine.load(file, { threads, contextLength: ctx, device, vramBytes: vram, policy, hardware: planOn, linkGBps: 10, workload: { batch: slots, prompt, gen, vramBytes: vram }, maxSequences: slots, feedback: false });
      } catch (e) {
        process.stdout.write(`${device.padEnd(8)} | ${row.label.padEnd(8)} | ${policy} does not load: ${(e as Error).message.split('\n')[0]}\n`);
        continue;
      }
      try {
        // The median of --repeat runs by throughput (a run of a tiny model lasts a fraction of a second).
        const runs: Awaited<ReturnType<typeof serve>>[] = [];
        for (let i = 0; i < repeat; i++) runs.push(await serve(engine, row, reqs, hp.nVocab));
        runs.sort((a, b) => a.m.tokensPerS - b.m.tokensPerS);
        const { m, limits } = runs[Math.floor(runs.length / 2)]!;
        const sim = simulate(engine, row, reqs, limits, slots);
        const simTok = typeof sim === 'string' ? '—' : sim.tokensPerS.toFixed(1);
        const ratio = typeof sim === 'string' ? '—' : (sim.tokensPerS / m.tokensPerS).toFixed(2);
        const lat = `${m.perTokenMs.toFixed(1)} / ${typeof sim === 'string' ? '—' : sim.perTokenMs.toFixed(1)}`;
        process.stdout.write(`${device.padEnd(8)} | ${row.label.padEnd(8)} | ${m.tokensPerS.toFixed(1).padStart(14)} | ${simTok.padStart(15)} | ${ratio.padStart(8)} | ${lat.padStart(23)} | ${(100 * m.cpuShare).toFixed(0).padStart(13)}% | ${String(m.swaps).padStart(5)} | ${m.iterations} (${m.modes}) | ${typeof sim === 'string' ? sim : `${sim.iterations} (${sim.modes})`}\n`);
        if (kind === 'gpu-only') process.stdout.write(`         |          | device KV ${limits.gpuKvTokens} tokens, ${limits.maxBatchTokens} rows per step, device budget ${(vram / 2 ** 20).toFixed(2)} MiB, split ${engine.execution.split}\n`);
      } finally {
        engine.dispose();
      }
    }
  }
}
