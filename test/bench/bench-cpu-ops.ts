// Where a decode token's time goes, per op kind, at each thread count: the model's own per-op
// trace (start/end ns of every executed op, which includes the pool's dispatch and join) over
// `--gen` decode steps after a `--prompt`-token prompt, averaged per token. "between ops" is the
// step's wall time not covered by any op (the executor's own bookkeeping).
//   node --import tsx test/bench/bench-cpu-ops.ts --model FILE [--threads 1,2] [--prompt 256] [--gen 32]
import { readGguf } from '../../engine/model/gguf';
import { readHparams } from '../../engine/model/hparams';
import { createNativeModel } from '../../engine/native/model';
import { benchTokens } from '../../engine/runtime/bench';
import { nativeConfig, PREFILL_BATCH } from '../../engine/runtime/native-config';

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

interface Breakdown {
  stepNs: number;
  byKind: Map<string, { ns: number; count: number }>;
  betweenNs: number;
}

async function decodeBreakdown(path: string, threads: number, promptTokens: number, genTokens: number): Promise<Breakdown> {
  const file = readGguf(path);
  const hp = readHparams(file);
  const model = createNativeModel(
    path,
    file.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset })),
    nativeConfig(file, hp, promptTokens + genTokens + 8, threads),
  );
  try {
    const prompt = benchTokens(promptTokens, hp.nVocab);
    for (let pos = 0; pos < prompt.length; pos += PREFILL_BATCH) {
      await model.evalAsync(Int32Array.from(prompt.slice(pos, pos + PREFILL_BATCH)), pos);
    }
    // One untraced decode step first: the prompt's last chunk leaves other data in the caches.
    let pos = prompt.length;
    await model.evalAsync(Int32Array.of(1), pos++);
    model.tracing = true;
    for (let i = 0; i < genTokens; i++) await model.evalAsync(Int32Array.of((i * 7919) % hp.nVocab), pos++);
    const raw = model.takeTrace();
    model.tracing = false;
    const ops = model.compiledOps();
    const byKind = new Map<string, { ns: number; count: number }>();
    const steps = new Map<number, { start: number; end: number; covered: number }>();
    for (let i = 0; i < raw.length; i += 4) {
      const step = raw[i]!, op = ops[raw[i + 1]!]!, start = raw[i + 2]!, end = raw[i + 3]!;
      const key = op.weight ? `${op.kind} ${op.weight.replace(/^blk\.\d+\./, '')}` : op.kind;
      const k = byKind.get(key) ?? { ns: 0, count: 0 };
      k.ns += end - start;
      k.count += 1;
      byKind.set(key, k);
      const s = steps.get(step) ?? { start: Infinity, end: -Infinity, covered: 0 };
      s.start = Math.min(s.start, start);
      s.end = Math.max(s.end, end);
      s.covered += end - start;
      steps.set(step, s);
    }
    let stepNs = 0, betweenNs = 0;
    for (const s of steps.values()) {
      stepNs += s.end - s.start;
      betweenNs += s.end - s.start - s.covered;
    }
    const n = steps.size;
    for (const v of byKind.values()) v.ns /= n;
    return { stepNs: stepNs / n, byKind, betweenNs: betweenNs / n };
  } finally {
    model.dispose();
  }
}

async function main(): Promise<void> {
  const path = option('model', '');
  if (!path) throw new Error('--model FILE is required');
  const threadList = option('threads', '1,2').split(',').map(Number);
  const promptTokens = Number(option('prompt', '256'));
  const genTokens = Number(option('gen', '32'));
  const results: Breakdown[] = [];
  for (const t of threadList) results.push(await decodeBreakdown(path, t, promptTokens, genTokens));
  const kinds = [...new Set(results.flatMap((r) => [...r.byKind.keys()]))];
  kinds.sort((a, b) => results[0]!.byKind.get(b)!.ns - results[0]!.byKind.get(a)!.ns);
  const us = (ns: number) => (ns / 1000).toFixed(1).padStart(9);
  console.log(`${'op (per decode token)'.padEnd(34)}${threadList.map((t) => `${t}T µs`.padStart(9)).join('')}  ops/token  speed-up`);
  for (const k of kinds) {
    const v = results.map((r) => r.byKind.get(k));
    const sp = v[0] && v[v.length - 1] ? (v[0].ns / v[v.length - 1]!.ns).toFixed(2) : '—';
    console.log(`${k.padEnd(34)}${v.map((x) => us(x?.ns ?? 0)).join('')}  ${String((v[0]?.count ?? 0) / genTokens).padStart(9)}  ${sp.padStart(8)}`);
  }
  console.log(`${'between ops'.padEnd(34)}${results.map((r) => us(r.betweenNs)).join('')}`);
  console.log(`${'step (wall)'.padEnd(34)}${results.map((r) => us(r.stepNs)).join('')}  → ${results.map((r) => (1e9 / r.stepNs).toFixed(1)).join(' / ')} tok/s`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
