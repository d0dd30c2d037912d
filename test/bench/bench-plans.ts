// Predicted against measured, per policy: every policy's plan executed on this machine's
// devices (the loopback accelerator, with a link capped to resemble PCIe relative to this CPU:
// 0.4 × its 1-thread copy bandwidth, see engine/runtime/devices.ts), decode step time and per-layer time as the plan predicts
// them and as the executor's traces measure them. A benchmark, not a test: it prints.
//
// Run: npm run bench:plans [-- --model FILE] [--vram 40%|BYTES] [--prompt 512] [--gen 16] [--threads 1] [--device loopback|vulkan]
// With --device vulkan the plans are made with the profile's measurement of the Vulkan device
// (its own kernels, copies and submissions) and run on it.
//
// Measured feedback (issue 21 item 4): the first half of every policy's decode steps folds into
// one measured correction of the profile (engine/cost/feedback.ts); the second half is what the
// table measures. Then every policy is planned again with the correction, and the table reports
// the per-layer error before and after it, and whether `auto` picks a policy within 10 % of the
// fastest executed one, before and after. The "own" column plans each policy with the correction
// of its own steps alone (a class another policy's steps set shows as a difference); --layers
// also prints the last layer's ops, predicted per lane before / with the shared / with its own
// correction, next to what they measured.
import os from 'node:os';
import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf/index';
import { readHparams } from '../../engine/model/hparams';
import { getProfile } from '../../engine/profile/profiler';
import { nativeKernels } from '../../engine/native/model';
import { parseBytes } from '../../engine/plan/api';
import { Engine } from '../../engine/runtime/engine';
import { defaultLinkGBps } from '../../engine/runtime/devices';
import { stepBreakdown, type StepBreakdown } from '../../engine/runtime/trace';
import { argmax } from '../../engine/runtime/sampler';
import { MeasuredCorrection } from '../../engine/cost/feedback';
import { planRequest } from '../../engine/plan/api';
import type { Plan } from '../../engine/plan/types';
import { shapeFromGguf } from '../../engine/model/shape';
import { StepFeedback } from '../../engine/runtime/feedback';
import { BENCH_SHAPES, benchModelFile } from './bench-models';

/** Most untimed prompts per policy that teach the prompt's classes their factor. */
const EXTRA_PROMPTS = 3;
let extraPrompts = 0;

const POLICIES = ['cpu-only', 'gpu-only', 'layer-split', 'split-points', 'lia', 'kvpr', 'neo', 'apex', 'auto'];

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] ?? NaN; };

async function main(): Promise<void> {
  const file = arg('model', '') || benchModelFile(BENCH_SHAPES[0]!, GgmlType.Q8_0);
  const prompt = Number(arg('prompt', '512'));
  const gen = Number(arg('gen', '24'));
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
  process.stdout.write(`workload: batch 1, prompt ${prompt} (timed), decode ${gen} tokens: the first ${Math.floor(gen / 2)} (and the first half of the prompt's chunks) fold into the measured correction, the other ${gen - Math.floor(gen / 2)} are measured (median step); plans are made for gen ${gen * 2}\n\n`);
  process.stdout.write('policy        ran as        split                                        | step ms  predicted  measured  ratio | prefill ms pred. meas. | layer |err| mean  max | lanes busy ms (cpu/dev/h2d/d2h) overlap\n');
  const measured: { policy: string; chosen: string; ms: number; totalMs: number }[] = [];
  const workloadGen = gen * 2;
  const shape = shapeFromGguf(readGguf(file));
  const correction = new MeasuredCorrection();
  const runs: { policy: string; plan: Plan; params: NonNullable<Engine['execution']['planParams']>; b: StepBreakdown; own: MeasuredCorrection }[] = [];
  for (const policy of POLICIES) {
    let engine: Engine;
    try {
      engine = await Engine.load(file, {
        threads, contextLength: prompt + gen + 64, device, vramBytes: vram, policy, hardware: profile, linkGBps: link, deviceThreads: 1, feedback: false,
        workload: { batch: 1, prompt, gen: workloadGen, vramBytes: vram },
      });
    } catch (e) {
      process.stdout.write(`${policy.padEnd(13)} does not apply: ${(e as Error).message.slice(0, 140)}\n`);
      continue;
    }
    try {
      const ex = engine.execution;
      const plan = ex.plan!;
      const tokens = Array.from({ length: prompt }, (_, i) => 1 + ((i * 7919) % (nVocab - 1)));
      engine.setTracing(true);
      const t0 = performance.now();
      let logits = await engine.logits(tokens);
      const prefillMs = performance.now() - t0;
      // The prompt's native steps as the engine ran them (their rows grow once its speed is known).
      const promptSteps = [...engine.lastPromptSteps()];
      const chunks = promptSteps.length;
      for (let i = 0; i < gen; i++) {
        tokens.push(argmax(logits));
        logits = await engine.logits(tokens);
      }
      const trace = engine.takeTrace();
      const ids = [...new Set(trace.events.map((e) => e.step))].sort((x, y) => x - y);
      const all = ids.slice(chunks);
      const nLayers = plan.stages.decode.layers.length;
      // The first half of the prompt's chunks and of the decode steps teach the correction
      // (against the profile the plan was made with); the decode steps of the second half are
      // measured, so the correction is judged on steps it did not see. (The prefill time is the
      // whole prompt's, its first half included.)
      const learn = all.slice(0, Math.floor(all.length / 2));
      const steps = all.slice(learn.length);
      const hw = ex.planParams?.hardware;
      // The policy's own steps alone, beside the shared correction: a class whose factor another
      // policy's steps set shows as a difference between the two "after" columns.
      const own = new MeasuredCorrection();
      const fold = (samples: ReturnType<StepFeedback['samples']>) => { correction.fold(samples); own.fold(samples); };
      if (typeof hw === 'object') {
        const fb = new StepFeedback(shape, hw, { correction });
        ids.slice(0, Math.floor(chunks / 2)).forEach((s, i) => fold(fb.samples(trace, s, [promptSteps[i]!], 1)));
        learn.forEach((s, i) => fold(fb.samples(trace, s, [{ rows: 1, context: prompt + i }], 1)));
      }
      // The prompt's classes (rows 9-64 and 65+) see one step per chunk, too few for their factor
      // (minSteps) from half of one prompt: they get more steps from untimed prompts of their own
      // (other tokens, so no prefix is reused), at most EXTRA_PROMPTS, until each has minSteps.
      if (typeof hw === 'object') {
        const fb = new StepFeedback(shape, hw, { correction });
        const promptKeys = (t: ReturnType<Engine['takeTrace']>, stepIds: number[], stepsRun: readonly { rows: number; context: number }[]) =>
          new Set(stepIds.flatMap((s, i) => fb.samples(t, s, [stepsRun[i]!], 1).map((x) => x.key)));
        const short = (keys: Set<string>) => [...keys].filter((k) => correction.stepsOf(k) < correction.options.minSteps);
        let keys = promptKeys(trace, ids.slice(0, chunks), promptSteps);
        for (let extra = 1; extra <= EXTRA_PROMPTS && short(keys).length > 0; extra++) {
          const more = Array.from({ length: prompt }, (_, i) => 1 + ((i * 7919 + extra * 104729) % (nVocab - 1)));
          engine.setTracing(true);
          await engine.logits(more);
          const t = engine.takeTrace();
          const moreSteps = [...engine.lastPromptSteps()];
          const sids = [...new Set(t.events.map((e) => e.step))].sort((x, y) => x - y).slice(0, moreSteps.length);
          sids.forEach((s, i) => fold(fb.samples(t, s, [moreSteps[i]!], 1)));
          keys = promptKeys(t, sids, moreSteps);
          extraPrompts++;
        }
      }
      // Median step by wall time; the per-layer breakdown averaged over the steps.
      const stepMs = median(steps.map((s) => stepBreakdown(trace, [s], nLayers).stepMs));
      const b = stepBreakdown(trace, steps, nLayers);
      if (!ex.fallback && ex.planParams) runs.push({ policy, plan, params: ex.planParams, b, own });
      const errs = plan.stages.decode.layers.map((l, i) => Math.abs(b.layerMs[i]! - l.predictedMs) / Math.max(1e-9, l.predictedMs));
      const predicted = plan.predicted.stepMs;
      process.stdout.write(
        `${policy.padEnd(13)} ${plan.chosenPolicy.padEnd(13)} ${(ex.fallback ? `FELL BACK: ${ex.fallback}` : ex.split).slice(0, 44).padEnd(44)} | ` +
        `${predicted.toFixed(2).padStart(9)} ${stepMs.toFixed(2).padStart(9)} ${(stepMs / predicted).toFixed(2).padStart(6)} | ` +
        `${plan.predicted.prefillMs.toFixed(0).padStart(11)} ${prefillMs.toFixed(0).padStart(6)} | ` +
        `${(100 * errs.reduce((a, c) => a + c, 0) / errs.length).toFixed(0).padStart(9)}% ${(100 * Math.max(...errs)).toFixed(0).padStart(4)}% | ` +
        `${[b.perLane.cpu, b.perLane.device, b.perLane.h2d, b.perLane.d2h].map((v) => v.toFixed(2)).join('/').padStart(26)} ${b.overlapMs.toFixed(2)}\n`,
      );
      // What auto minimises: the workload's time, prefill + gen × step (the plan's workload).
      if (!ex.fallback) measured.push({ policy, chosen: plan.chosenPolicy, ms: stepMs, totalMs: prefillMs + workloadGen * stepMs });
      if (process.argv.includes('--layers')) {
        plan.stages.decode.layers.forEach((l, i) => process.stdout.write(`    layer ${String(i).padStart(2)} predicted ${l.predictedMs.toFixed(3)} ms measured ${b.layerMs[i]!.toFixed(3)} ms\n`));
      }
    } finally {
      engine.dispose();
    }
  }
  const fastest = measured.filter((m) => m.policy !== 'auto').sort((a, b) => a.ms - b.ms)[0];
  const snap = correction.snapshot();
  process.stdout.write(`\nmeasured correction: ${snap.steps} steps folded; factors applied (measured ÷ profile): ${Object.entries(snap.factors).map(([k, f]) => `${k} ×${f}`).join(', ') || 'none yet'}\n`);
  const unapplied = correction.describe().filter((d) => !d.applied);
  if (unapplied.length) process.stdout.write(`  not applied yet (fewer than ${correction.options.minSteps} steps): ${unapplied.map((d) => `${d.key} (${d.steps})`).join(', ')}\n`);
  process.stdout.write(`  ${extraPrompts} untimed prompt(s) taught the prompt's classes; per class, judged over the last ${correction.options.window} steps (never "agrees" on fewer):\n`);
  for (const d of correction.describe()) {
    const v = d.verdict;
    process.stdout.write(`    ${d.key.padEnd(40)} ×${String(d.factor).padEnd(6)} ${v.state === 'not enough steps' ? `not enough steps (${v.steps} of ${v.needed})` : `${v.state} (median ratio ${v.ratio})`}\n`);
  }
  // Per layer, before and after: the executed placement's plan, and the same policy planned with the correction.
  process.stdout.write('\npolicy        measured step | predicted step before → after | layer |err| mean before → after   (after: the same policy planned with the correction; own: with the correction of its own steps only)\n');
  const layerErr = (p: Plan, b: StepBreakdown): number => {
    const errs = p.stages.decode.layers.map((l, i) => Math.abs(b.layerMs[i]! - l.predictedMs) / Math.max(1e-9, l.predictedMs));
    return (100 * errs.reduce((a, c) => a + c, 0)) / errs.length;
  };
  const placement = (p: Plan): string => JSON.stringify(p.stages.decode.layers.map((l) => [l.ops.map((o) => [o.device, o.weights, o.gpuFraction]), l.kv.device]));
  for (const r of runs) {
    let line: string;
    const ms = measured.find((m) => m.policy === r.policy)?.ms ?? NaN;
    const head = `${ms.toFixed(2).padStart(13)} | ${r.plan.predicted.stepMs.toFixed(2).padStart(12)} → `;
    try {
      const after = planRequest({ ...r.params, policy: r.policy, correction: snap });
      const ownPlan = planRequest({ ...r.params, policy: r.policy, correction: r.own.snapshot() });
      const ownText = placement(ownPlan) === placement(r.plan) ? `own ${layerErr(ownPlan, r.b).toFixed(0)} %` : 'own: placed differently';
      line = placement(after) === placement(r.plan)
        ? `${head}${after.predicted.stepMs.toFixed(2).padEnd(6)} | ${layerErr(r.plan, r.b).toFixed(0).padStart(8)} % → ${layerErr(after, r.b).toFixed(0)} %, ${ownText}   (${after.costSource})`
        : `${head}${after.predicted.stepMs.toFixed(2).padEnd(6)} | ${layerErr(r.plan, r.b).toFixed(0).padStart(8)} % → n/a: with the correction ${r.policy} places ops differently (${after.chosenPolicy})`;
    } catch (e) {
      line = `${head}n/a    | ${layerErr(r.plan, r.b).toFixed(0).padStart(8)} % → n/a: ${(e as Error).message.slice(0, 100)}`;
    }
    process.stdout.write(`${r.policy.padEnd(13)} ${line}\n`);
    if (process.argv.includes('--layers')) {
      // The last layer (streamed or CPU-side where a policy keeps the first ones resident), per
      // plan op: predicted per lane before / with the shared correction / with its own, and measured.
      try {
        const k = r.plan.stages.decode.layers.length - 1;
        const plans = [r.plan, planRequest({ ...r.params, policy: r.policy, correction: snap }), planRequest({ ...r.params, policy: r.policy, correction: r.own.snapshot() })];
        const terms = (p: Plan) => JSON.stringify((p.details as { split?: { terms?: unknown } } | undefined)?.split?.terms ?? '');
        process.stdout.write(`    layer ${k}: measured ${r.b.layerMs[k]!.toFixed(3)} ms; predicted ${plans.map((p) => p.stages.decode.layers[k]!.predictedMs.toFixed(3)).join(' / ')} ms (before / shared / own)${terms(r.plan) !== '""' ? `; terms ${plans.map(terms).join(' / ')}` : ''}\n`);
        r.plan.stages.decode.layers[k]!.ops.forEach((o, i) => {
          const lanes = (p: Plan) => Object.entries(p.stages.decode.layers[k]!.ops[i]!.predictedMs).filter(([, v]) => (v ?? 0) > 0).map(([l, v]) => `${l} ${(v as number).toFixed(3)}`).join(' ');
          // Scores, Softmax and WV run as one fused kernel (native 'Attention'): its time on the Scores line.
          const fused = o.name === 'Scores' ? r.b.opMs[k]!.Attention : o.name === 'Softmax' || o.name === 'WV' ? NaN : undefined;
          const m = fused ?? r.b.opMs[k]![o.name] ?? 0;
          process.stdout.write(`      ${o.name.padEnd(10)} ${o.device.padEnd(5)} measured ${Number.isNaN(m) ? '  (fused)' : m.toFixed(3)} | ${plans.map(lanes).join(' | ')}\n`);
        });
      } catch (e) {
        process.stdout.write(`    layers: ${(e as Error).message.slice(0, 100)}\n`);
      }
    }
  }
  if (!fastest) return;
  // auto minimises the workload's time (prefill + gen × decode step); the decode step alone beside it.
  const fastestTotal = measured.filter((m) => m.policy !== 'auto').sort((a, b) => a.totalMs - b.totalMs)[0]!;
  process.stdout.write(`\nmeasured workload time (prefill ${prompt} + ${workloadGen} × decode step): ${measured.filter((m) => m.policy !== 'auto').map((m) => `${m.policy} ${(m.totalMs / 1000).toFixed(2)} s`).join(', ')}\n`);
  const verdict = (chosen: string, when: string): void => {
    const ran = measured.find((m) => m.policy === chosen);
    if (!ran) { process.stdout.write(`auto ${when} chose ${chosen}, which did not execute here: no measured time to compare\n`); return; }
    const off = ran.totalMs / fastestTotal.totalMs - 1;
    const offStep = ran.ms / fastest.ms - 1;
    process.stdout.write(`auto ${when} chose ${chosen}: workload ${(ran.totalMs / 1000).toFixed(2)} s, fastest executed ${fastestTotal.policy} ${(fastestTotal.totalMs / 1000).toFixed(2)} s: ${off <= 0.1 ? 'WITHIN' : 'NOT within'} 10 % (${(100 * off).toFixed(0)} %); decode step ${ran.ms.toFixed(2)} ms vs fastest ${fastest.policy} ${fastest.ms.toFixed(2)} ms (${(100 * offStep).toFixed(0)} %)\n`);
  };
  process.stdout.write('\n');
  const autoRun = runs.find((r) => r.policy === 'auto');
  if (autoRun) {
    verdict(autoRun.plan.chosenPolicy, 'before feedback');
    try {
      verdict(planRequest({ ...autoRun.params, policy: 'auto', correction: snap }).chosenPolicy, `after feedback (${snap.steps} steps)`);
    } catch (e) {
      process.stdout.write(`auto after feedback: no plan (${(e as Error).message.slice(0, 120)})\n`);
    }
  }
}

main().catch((e) => { process.stderr.write(`${(e as Error).stack}\n`); process.exitCode = 1; });
