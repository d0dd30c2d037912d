// Where a decode token's time goes, per op kind, at each thread count: the model's own per-op
// trace (start/end ns of every executed op, which includes the pool's dispatch and join) over
// `--gen` decode steps after a `--prompt`-token prompt, averaged per token. "between ops" is the
// step's wall time not covered by any op (the executor's own bookkeeping). Each matmul row also
// shows the GB/s its weights streamed at; the summary puts all matmuls' bytes over their time
// next to the machine's read bandwidth at that thread count (best of 9 probes), and sums the
// rest (small ops and the time between ops), which is what keeps decode below the read limit.
//   node --import tsx test/bench/bench-cpu-ops.ts --model FILE [--threads 1,2] [--prompt 256] [--gen 32] [--json]
import { bestReadBandwidth } from '../../engine/hardware/bench-native';
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
  threads: number;
  stepNs: number;
  /** The process's CPU time per token (all threads; a spinning worker counts): at one thread, a step's time less the moments another process held the core. */
  cpuNs: number;
  byKind: Map<string, { ns: number; count: number }>;
  betweenNs: number;
  readBytesPerS: number;
}

/** Bytes a decode token reads of each matmul weight kind ("matmul ffn_up.weight"): all layers' tensors of that name. */
function weightBytesByKind(path: string): Map<string, number> {
  const bytes = new Map<string, number>();
  for (const t of readGguf(path).tensors) {
    const key = `matmul ${t.name.replace(/^blk\.\d+\./, '')}`;
    bytes.set(key, (bytes.get(key) ?? 0) + t.byteSize);
  }
  return bytes;
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
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < genTokens; i++) await model.evalAsync(Int32Array.of((i * 7919) % hp.nVocab), pos++);
    const cpu = process.cpuUsage(cpu0);
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
    return { threads, stepNs: stepNs / n, cpuNs: ((cpu.user + cpu.system) * 1e3) / genTokens, byKind, betweenNs: betweenNs / n, readBytesPerS: 0 };
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
  for (const t of threadList) {
    const r = await decodeBreakdown(path, t, promptTokens, genTokens);
    // Probed after the model is gone, so the probe's buffer does not compete with its weights.
    r.readBytesPerS = await bestReadBandwidth(512 << 20, t, 9);
    results.push(r);
  }
  const weightBytes = weightBytesByKind(path);
  const kinds = [...new Set(results.flatMap((r) => [...r.byKind.keys()]))];
  kinds.sort((a, b) => (results[0]!.byKind.get(b)?.ns ?? 0) - (results[0]!.byKind.get(a)?.ns ?? 0));
  // Matmuls against everything else, per token.
  const split = results.map((r) => {
    let mmNs = 0, mmBytes = 0;
    for (const [k, v] of r.byKind) {
      if (!k.startsWith('matmul ')) continue;
      mmNs += v.ns;
      mmBytes += weightBytes.get(k) ?? 0;
    }
    return { mmNs, mmBytes, otherNs: r.stepNs - mmNs };
  });
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(results.map((r, i) => ({
      threads: r.threads, step_us: r.stepNs / 1e3, cpu_us: r.cpuNs / 1e3, between_us: r.betweenNs / 1e3, read_gb_s: r.readBytesPerS / 1e9,
      matmul_us: split[i]!.mmNs / 1e3, matmul_gb_s: split[i]!.mmBytes / split[i]!.mmNs, other_us: split[i]!.otherNs / 1e3,
      ops: Object.fromEntries([...r.byKind].map(([k, v]) => [k, { us: v.ns / 1e3, per_token: v.count / genTokens }])),
    }))));
    return;
  }
  const us = (ns: number) => (ns / 1000).toFixed(1).padStart(9);
  const gbs = (bytes: number | undefined, ns: number | undefined) => (bytes && ns ? (bytes / ns).toFixed(1) : '').padStart(9);
  console.log(`${'op (per decode token)'.padEnd(34)}${threadList.map((t) => `${t}T µs`.padStart(9)).join('')}  ops/token  speed-up  ${threadList.map((t) => `${t}T GB/s`.padStart(9)).join('')}`);
  for (const k of kinds) {
    const v = results.map((r) => r.byKind.get(k));
    const sp = v[0] && v[v.length - 1] ? (v[0].ns / v[v.length - 1]!.ns).toFixed(2) : '—';
    console.log(`${k.padEnd(34)}${v.map((x) => us(x?.ns ?? 0)).join('')}  ${String((v[0]?.count ?? 0) / genTokens).padStart(9)}  ${sp.padStart(8)}  ${v.map((x) => gbs(weightBytes.get(k), x?.ns)).join('')}`);
  }
  console.log(`${'between ops'.padEnd(34)}${results.map((r) => us(r.betweenNs)).join('')}`);
  console.log(`${'step (wall)'.padEnd(34)}${results.map((r) => us(r.stepNs)).join('')}  → ${results.map((r) => (1e9 / r.stepNs).toFixed(1)).join(' / ')} tok/s`);
  console.log(`${'process CPU time'.padEnd(34)}${results.map((r) => us(r.cpuNs)).join('')}`);
  console.log(`${'all matmuls'.padEnd(34)}${split.map((s) => us(s.mmNs)).join('')}  ${split.map((s, i) => `${threadList[i]}T ${(s.mmBytes / s.mmNs).toFixed(1)} GB/s = ${((s.mmBytes / s.mmNs) / (results[i]!.readBytesPerS / 1e9) * 100).toFixed(0)} % of the read bandwidth ${(results[i]!.readBytesPerS / 1e9).toFixed(1)}`).join(', ')}`);
  console.log(`${'everything else'.padEnd(34)}${split.map((s) => us(s.otherNs)).join('')}  ${split.map((s, i) => `${threadList[i]}T ${(s.otherNs / results[i]!.stepNs * 100).toFixed(0)} % of the step`).join(', ')}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
