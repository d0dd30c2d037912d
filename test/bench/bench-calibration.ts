// `npm run bench:calibration`: predicted vs measured CPU prefill and decode on this machine.
// For each synthetic model (0.5B and 1.3B shapes, bench-models.ts) it asks the planner what
// `fulcrum plan --hardware this --policy cpu-only` predicts, then runs the native executor on the
// same file (engine/runtime/bench.ts, the executor the runtime uses) and prints both with their
// ratio. Not a timed test: a measurement to read, on a machine that may be shared — run it alone.
//
// Options: --shapes 0.5B,1.3B  --types Q8_0,Q4_K  --prompt N (default 256)  --gen N (default 64)
//          --runs N (default 2: each measurement repeated, min..max printed)
//          --recalibrate: re-run the profiler's calibration step (engine/profile/calibration-run.ts)
//            first and predict with it (the cache is not rewritten) — on a shared machine the load
//            changes by the minute, so fit and check then see the same conditions.
import { parseArgs } from '../../engine/cli/command';
import { ggmlTypeByName, ggmlTypeName } from '../../engine/model/ggml-types';
import { planRequest } from '../../engine/plan/api';
import { CHILD_FLAG, childMain, runBenchChild } from './bench-child';
import { calibrateCpu } from '../../engine/profile/calibration-run';
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
  const cached: HardwareProfile = loadThisProfile();
  const recalibrate = args.options.has('recalibrate');
  const models = shapes.flatMap((label) => {
    const shape = BENCH_SHAPES.find((s) => s.label === label);
    if (!shape) throw new Error(`--shapes: unknown shape '${label}' (shapes: ${BENCH_SHAPES.map((s) => s.label).join(', ')})`);
    return types.flatMap((type) => {
      const why = unsupportedReason(shape, type);
      if (why) { console.log(`${label} ${ggmlTypeName(type)}: skipped (${why})`); return []; }
      return [{ name: `${label} ${ggmlTypeName(type)}`, file: benchModelFile(shape, type) }];
    });
  });
  // Rounds: (re-fit,) then every model once, so each prediction meets a measurement taken under
  // the same load — on a shared machine the load changes by the minute.
  type Cell = { pre: number; dec: number; predPre: number; predDec: number };
  const cells = new Map<string, Cell[]>();
  console.log('round  model          calibration (GEMV×, GEMM×, op) prefill tok/s pred / meas  ratio | decode tok/s pred / meas  ratio');
  for (let round = 1; round <= runs; round++) {
    const hardware = structuredClone(cached);
    if (recalibrate) {
      delete hardware.cpu.calibration;
      hardware.cpu.calibration = await calibrateCpu(structuredClone(hardware), { promptTokens: 256, genTokens: 32, runs: 3, threads: hardware.cpu.cores });
    }
    const k = hardware.cpu.calibration;
    const kText = k ? `${k.gemvScale.toFixed(3)}, ${k.gemmScale.toFixed(3)}${k.opOverheadUs !== undefined ? `, ${k.opOverheadUs.toFixed(1)} µs/op` : ''}` : 'none (run fulcrum profile)';
    for (const m of models) {
      // The prediction `fulcrum plan --hardware this --policy cpu-only` prints for this file.
      const plan = planRequest({ model: m.file, hardware, workload: `batch=1,prompt=${prompt},gen=${gen}`, policy: 'cpu-only' });
      const predPre = (prompt * 1000) / plan.predicted.prefillMs;
      // Decode at the mid-generation context is what the plan predicts; the run averages over the
      // same contexts (prompt .. prompt + gen), so the two compare directly.
      const predDec = plan.predicted.tokensPerSecond;
      // A fresh process per measurement (bench-child.ts, as bench:cpu does): the planner and
      // the profile loader in this process (CUDA probe, bench addon) must not share its cores.
      const r = await runBenchChild({ engine: 'fulcrum', model: m.file, threads: hardware.cpu.cores, promptTokens: prompt, genTokens: gen, contextSize: prompt + gen + 1 });
      const c: Cell = { pre: r.prompt_tokens_per_s, dec: r.gen_tokens_per_s, predPre, predDec };
      cells.set(m.name, [...(cells.get(m.name) ?? []), c]);
      console.log(`${String(round).padEnd(6)} ${m.name.padEnd(14)} ${kText.padEnd(28)} ${predPre.toFixed(1).padStart(8)} / ${c.pre.toFixed(1).padStart(7)}  ${(predPre / c.pre).toFixed(2)} | ${predDec.toFixed(1).padStart(7)} / ${c.dec.toFixed(1).padStart(6)}  ${(predDec / c.dec).toFixed(2)}`);
    }
  }
  for (const [name, cs] of cells) {
    const range = (xs: number[]): string => `${Math.min(...xs).toFixed(2)}..${Math.max(...xs).toFixed(2)}`;
    // Against the fastest round too: the calibration keeps its fastest run (outside load only
    // slows a run), so this is the like-for-like comparison on a shared machine.
    const best = (f: (c: Cell) => number, p: (c: Cell) => number): string => {
      const c = cs.reduce((a, b) => (f(b) > f(a) ? b : a));
      return `${(p(c) / f(c)).toFixed(2)} (${p(c).toFixed(1)} / ${f(c).toFixed(1)})`;
    };
    console.log(`${name}: predicted/measured prefill ${range(cs.map((c) => c.predPre / c.pre))}, decode ${range(cs.map((c) => c.predDec / c.dec))} over ${cs.length} round(s); against the fastest round: prefill ${best((c) => c.pre, (c) => c.predPre)}, decode ${best((c) => c.dec, (c) => c.predDec)}`);
  }
  console.log(`(prompt ${prompt}, gen ${gen}; profile ${cached.name}, measured ${cached.source.measuredAt ?? '?'}${recalibrate ? '; calibration re-fitted each round' : ''})`);
}

const child = process.argv[2] === CHILD_FLAG;
(child ? childMain(process.argv.slice(3)) : main()).catch((e: unknown) => { console.error(`bench-calibration: ${(e as Error).message}`); process.exit(1); });
