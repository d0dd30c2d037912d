// `npm run bench:calibration`: predicted vs measured CPU prefill and decode on this machine.
// For each synthetic model (0.5B and 1.3B shapes, bench-models.ts) it asks the planner what
// `fulcrum plan --hardware this --policy cpu-only` predicts, then runs the native executor on the
// same file (engine/runtime/bench.ts, the executor the runtime uses) and prints both with their
// ratio. Not a timed test: a measurement to read, on a machine that may be shared — run it alone.
//
// Options: --shapes 0.5B,1.3B  --types Q8_0,Q4_K  --prompt N (default 256)  --gen N (default 64)
//          --runs N (default 2: each measurement repeated, min..max printed)
//          --recalibrate: re-run the profiler's calibration step (engine/hardware/calibration-run.ts)
//            first and predict with it (the cache is not rewritten) — on a shared machine the load
//            changes by the minute, so fit and check then see the same conditions.
import { parseArgs } from '../../engine/cli/command';
import { ggmlTypeByName, ggmlTypeName } from '../../engine/model/ggml-types';
import { planRequest } from '../../engine/plan/api';
import { benchModel } from '../../engine/runtime/bench';
import { calibrateCpu } from '../../engine/hardware/calibration-run';
import { loadThisProfile } from '../../engine/hardware/this';
import type { HardwareProfile } from '../../engine/hardware/types';
import { BENCH_SHAPES, benchModelFile, unsupportedReason } from './bench-models';

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2), ['shapes', 'types', 'prompt', 'gen', 'runs'], ['recalibrate']);
  const shapes = (args.options.get('shapes') ?? '0.5B,1.3B').split(',');
  const types = (args.options.get('types') ?? 'Q8_0').split(',').map((t) => {
    const g = ggmlTypeByName(t);
    if (g === undefined) throw new Error(`--types: unknown type '${t}'`);
    return g.type;
  });
  const prompt = Number(args.options.get('prompt') ?? 256);
  const gen = Number(args.options.get('gen') ?? 64);
  const runs = Number(args.options.get('runs') ?? 2);
  for (const [k, v] of [['prompt', prompt], ['gen', gen], ['runs', runs]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a positive integer, got ${v}`);
  }
  const hardware: HardwareProfile = loadThisProfile();
  if (args.options.has('recalibrate')) {
    const base = structuredClone(hardware);
    delete base.cpu.calibration;
    hardware.cpu.calibration = await calibrateCpu(base, { promptTokens: 256, genTokens: 32, runs: 1, threads: hardware.cpu.cores });
  }
  const k = hardware.cpu.calibration;
  console.log(k
    ? `calibration: GEMV ×${k.gemvScale}, GEMM ×${k.gemmScale} (calibration model: ${k.decodeTokensPerS.toFixed(1)} tok/s decode, ${k.prefillTokensPerS.toFixed(1)} tok/s prefill)`
    : 'calibration: none in this profile (run `fulcrum profile`): CPU rates are the microbenchmarks\' as measured');
  console.log('model         type   prefill tok/s predicted  measured (min..max)   ratio | decode tok/s predicted  measured (min..max)   ratio');
  for (const label of shapes) {
    const shape = BENCH_SHAPES.find((s) => s.label === label);
    if (!shape) throw new Error(`--shapes: unknown shape '${label}' (shapes: ${BENCH_SHAPES.map((s) => s.label).join(', ')})`);
    for (const type of types) {
      const why = unsupportedReason(shape, type);
      if (why) { console.log(`${label.padEnd(13)} ${ggmlTypeName(type).padEnd(6)} skipped: ${why}`); continue; }
      const file = benchModelFile(shape, type);
      // The planner's prediction for exactly this file (its GGUF shape and formats), this machine.
      const plan = planRequest({ model: file, hardware, workload: `batch=1,prompt=${prompt},gen=${gen}`, policy: 'cpu-only' });
      const predPrefill = (prompt * 1000) / plan.predicted.prefillMs;
      // Decode at the mid-generation context is what the plan predicts; the run averages over the
      // same contexts (prompt .. prompt + gen), so the two compare directly.
      const predDecode = plan.predicted.tokensPerSecond;
      const pre: number[] = [], dec: number[] = [];
      for (let i = 0; i < runs; i++) {
        const r = await benchModel(file, { promptTokens: prompt, genTokens: gen });
        pre.push(r.prompt_tokens_per_s); dec.push(r.gen_tokens_per_s);
      }
      const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      const cell = (p: number, xs: number[]): string =>
        `${p.toFixed(1).padStart(9)}  ${med(xs).toFixed(1).padStart(8)} (${Math.min(...xs).toFixed(1)}..${Math.max(...xs).toFixed(1)})`.padEnd(40) + `${(p / med(xs)).toFixed(2)}`;
      console.log(`${label.padEnd(13)} ${ggmlTypeName(type).padEnd(6)} ${cell(predPrefill, pre)} | ${cell(predDecode, dec)}`);
    }
  }
  console.log(`(prompt ${prompt}, gen ${gen}, ${runs} runs each; ratio = predicted / median measured; hardware profile: ${hardware.name}, measured ${hardware.source.measuredAt ?? '?'})`);
}

main().catch((e: unknown) => { console.error(`bench-calibration: ${(e as Error).message}`); process.exit(1); });
