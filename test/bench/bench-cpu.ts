// `npm run bench:cpu`: CPU prefill and decode throughput of Fulcrum against llama.cpp
// (node-llama-cpp, same file, same thread count, same KV cache size, flash attention off) on
// synthetic models of real shapes, plus decode as a fraction of the memory-bandwidth limit
// (measured read bandwidth ÷ weight bytes streamed per token), and each engine's peak resident
// memory against the target "Fulcrum's peak ≤ llama.cpp's + the KV cache". Every measurement runs
// in a fresh process of its own (bench-child.ts), one after the other, Fulcrum first, so each
// peak is that engine's alone. Prints a table and writes JSON under bench-results/.
//
// Options: --quick (64-token prompt, 16 decoded), --prompt N, --gen N, --threads 1,2,
// --shapes 0.5B,1.3B, --types Q8_0,Q4_0,Q4_K,Q4_K_M (llama.cpp's mix), --no-peer, --isa native|avx2|avx512 (Fulcrum with
// FULCRUM_ISA, llama.cpp with only its CPU library of that level: llama-cpp-isa.ts).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { parseArgs } from '../../engine/cli/command';
import { GgmlType, ggmlTypeByName, ggmlTypeName } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf';
import { packageRoot } from '../../engine/native/addon';
import { nativeKernels } from '../../engine/native/model';
import { CHILD_FLAG, childMain, runBenchChild, type ChildMemory, type ChildResult } from './bench-child';
import { llamaCppEnvFor, llamaCpuVariant, type IsaChoice } from './llama-cpp-isa';
import { BENCH_SHAPES, BENCH_TYPES, benchModelFile, benchTypeByLabel, unsupportedReason } from './bench-models';

/** llama.cpp rounds its KV cache up to a multiple of 256 cells; both engines get that size. */
const KV_CELL_PAD = 256;

interface Row {
  shape: string;
  type: string;
  threads: number;
  skipped?: string;
  weight_bytes_per_token?: number;
  read_bandwidth_bytes_per_s?: number;
  /** KV cache positions both engines were given, and that cache's bytes (f16). */
  context_size?: number;
  kv_bytes?: number;
  fulcrum?: EngineRow;
  llama_cpp?: EngineRow;
  /** Fulcrum's peak RSS ≤ llama.cpp's + kv_bytes, and by how much (negative: over by that much). */
  memory_target_met?: boolean;
  memory_margin_bytes?: number;
  /** The same with each engine's baseline (node + its native library, no model) subtracted. */
  memory_net_margin_bytes?: number;
  prefill_ratio?: number;
  decode_ratio?: number;
  fulcrum_decode_of_limit?: number;
  llama_cpp_decode_of_limit?: number;
}

interface EngineRow {
  prompt_tokens_per_s: number;
  gen_tokens_per_s: number;
  /** The measurement process's peak resident set (VmHWM), and its resident set before the model. */
  peak_rss_bytes: number;
  baseline_rss_bytes: number;
  memory: ChildMemory;
}

function engineRow(r: ChildResult): EngineRow {
  return {
    prompt_tokens_per_s: r.prompt_tokens_per_s,
    gen_tokens_per_s: r.gen_tokens_per_s,
    peak_rss_bytes: r.memory.peak_rss_bytes,
    baseline_rss_bytes: r.memory.baseline_rss_bytes,
    memory: r.memory,
  };
}

/** Bytes a decode step streams: every tensor once, except the embedding (one row is read). */
function weightBytesPerToken(file: string): number {
  const g = readGguf(file);
  const tied = !g.tensors.some((t) => t.name === 'output.weight');
  return g.tensors.reduce((s, t) => s + (t.name === 'token_embd.weight' && !tied ? 0 : t.byteSize), 0);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2), ['prompt', 'gen', 'threads', 'shapes', 'types', 'isa'], ['quick', 'no-peer']);
  const isa = (args.options.get('isa') ?? 'native') as IsaChoice;
  if (!['native', 'avx2', 'avx512'].includes(isa)) throw new Error(`--isa must be native, avx2 or avx512, got ${isa}`);
  const fulcrumEnv: Record<string, string> = isa === 'native' ? {} : { FULCRUM_ISA: isa };
  const llamaVariant = llamaCpuVariant(isa);
  const llamaEnv = llamaCppEnvFor(llamaVariant);
  const cpuInfo = readFileSync('/proc/cpuinfo', 'utf8');
  const cpuFlags = /^flags\s*:(.*)$/m.exec(cpuInfo)?.[1]?.trim().split(/\s+/) ?? [];
  process.stdout.write(`CPU: ${/^model name\s*:(.*)$/m.exec(cpuInfo)?.[1]?.trim()} (${['avx2', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'amx_int8'].filter((f) => cpuFlags.includes(f)).join(' ')}); ` +
    `ISA ${isa}: Fulcrum ${isa === 'native' ? `${nativeKernels().isaLevel()} (its own choice)` : `FULCRUM_ISA=${isa}`}, llama.cpp ${llamaVariant ? `libggml-cpu-${llamaVariant}.so only` : 'its own choice of CPU library'}\n`);
  const quick = args.options.has('quick');
  const promptTokens = Number(args.options.get('prompt') ?? (quick ? 64 : 512));
  const genTokens = Number(args.options.get('gen') ?? (quick ? 16 : 128));
  const threadList = (args.options.get('threads') ?? '1,2').split(',').map(Number);
  const shapeNames = args.options.get('shapes')?.split(',');
  const shapes = BENCH_SHAPES.filter((s) => !shapeNames || shapeNames.includes(s.label));
  const types = args.options.get('types')?.split(',').map((n) => {
    const t = benchTypeByLabel(n) ?? (ggmlTypeByName(n) ? { label: n, type: ggmlTypeByName(n)!.type as GgmlType } : undefined);
    if (!t) throw new Error(`unknown type ${n} (one of ${BENCH_TYPES.map((b) => b.label).join(', ')} or a GGML type name)`);
    return t;
  }) ?? BENCH_TYPES;
  const peer = !args.options.has('no-peer');
  // The decode loop of llama-cpp-bench.ts feeds one token beyond prompt + gen; +8 leaves room.
  const contextSize = Math.ceil((promptTokens + genTokens + 8) / KV_CELL_PAD) * KV_CELL_PAD;

  // The parent's kernels (bandwidth): at the ISA asked for, like the measured engine.
  const kernels = nativeKernels();
  // The limit is the best read bandwidth the machine showed in this run: a shared host's probe
  // varies between runs and minutes (seen on one VM: 21-31 GB/s at one thread), so each thread
  // count is probed at the start and again after every row of it, and the highest counts.
  const bandwidth = new Map<number, number>();
  const probes = new Map<number, number>();
  const probe = (t: number) => {
    bandwidth.set(t, Math.max(bandwidth.get(t) ?? 0, kernels.readBandwidth(512 << 20, t, 9)));
    probes.set(t, (probes.get(t) ?? 0) + 1);
  };
  for (const t of threadList) probe(t);

  const rows: Row[] = [];
  for (const shape of shapes) {
    for (const type of types) {
      const reason = unsupportedReason(shape, type.type);
      for (const threads of threadList) {
        const row: Row = { shape: shape.label, type: type.label, threads };
        rows.push(row);
        if (reason) {
          row.skipped = reason;
          continue;
        }
        process.stderr.write(`${shape.label} ${type.label} ${threads} thread(s)…\n`);
        const file = benchModelFile(shape, type);
        const bytes = weightBytesPerToken(file);
        row.weight_bytes_per_token = bytes;
        const req = { model: file, threads, promptTokens, genTokens, contextSize };
        const f = engineRow(await runBenchChild({ ...req, engine: 'fulcrum' }, fulcrumEnv));
        row.fulcrum = f;
        row.context_size = f.memory.context_size;
        row.kv_bytes = f.memory.kv_bytes;
        if (peer) {
          const l = engineRow(await runBenchChild({ ...req, engine: 'llama.cpp' }, llamaEnv));
          if (l.memory.context_size !== f.memory.context_size) {
            throw new Error(`${file}: llama.cpp made a KV cache of ${l.memory.context_size} cells, Fulcrum ${f.memory.context_size}; the memory comparison needs the same`);
          }
          row.llama_cpp = l;
          row.prefill_ratio = f.prompt_tokens_per_s / l.prompt_tokens_per_s;
          row.decode_ratio = f.gen_tokens_per_s / l.gen_tokens_per_s;
          row.memory_margin_bytes = l.peak_rss_bytes + f.memory.kv_bytes - f.peak_rss_bytes;
          row.memory_target_met = row.memory_margin_bytes >= 0;
          row.memory_net_margin_bytes = l.peak_rss_bytes - l.baseline_rss_bytes + f.memory.kv_bytes - (f.peak_rss_bytes - f.baseline_rss_bytes);
        }
        probe(threads);
      }
    }
  }
  for (const row of rows) {
    if (row.skipped || !row.fulcrum || row.weight_bytes_per_token === undefined) continue;
    const limit = bandwidth.get(row.threads)! / row.weight_bytes_per_token;
    row.read_bandwidth_bytes_per_s = bandwidth.get(row.threads)!;
    row.fulcrum_decode_of_limit = row.fulcrum.gen_tokens_per_s / limit;
    if (row.llama_cpp) row.llama_cpp_decode_of_limit = row.llama_cpp.gen_tokens_per_s / limit;
  }

  const fmt = (v: number | undefined, d = 1) => (v === undefined ? '—' : v.toFixed(d));
  const pct = (v: number | undefined) => (v === undefined ? '—' : `${(v * 100).toFixed(0)}%`);
  const mib = (v: number | undefined) => (v === undefined ? '—' : (v / 2 ** 20).toFixed(0));
  const target = (r: Row) =>
    r.memory_margin_bytes === undefined ? '—' : `${r.memory_target_met ? 'yes' : 'no'} (${r.memory_margin_bytes >= 0 ? '+' : ''}${mib(r.memory_margin_bytes)})`;
  const lines = [
    `prompt ${promptTokens} tokens, decode ${genTokens} tokens, KV cache ${contextSize} positions (both engines, f16); ` +
      `read bandwidth (best of the run's probes) ${threadList.map((t) => `${t}T ${(bandwidth.get(t)! / 1e9).toFixed(1)} GB/s (${probes.get(t)} probes)`).join(', ')}`,
    'shape  type  thr | prefill tok/s  fulcrum  llama.cpp  ratio | decode tok/s  fulcrum  llama.cpp  ratio | decode/limit  fulcrum  llama.cpp' +
      ' | peak RSS MiB  fulcrum  llama.cpp  KV | fulcrum ≤ llama.cpp+KV (margin MiB)',
  ];
  for (const r of rows) {
    if (r.skipped) {
      lines.push(`${r.shape.padEnd(6)} ${r.type.padEnd(5)} ${String(r.threads).padStart(3)} | skipped: ${r.skipped}`);
      continue;
    }
    lines.push(
      `${r.shape.padEnd(6)} ${r.type.padEnd(5)} ${String(r.threads).padStart(3)} |` +
        `${fmt(r.fulcrum?.prompt_tokens_per_s).padStart(23)}${fmt(r.llama_cpp?.prompt_tokens_per_s).padStart(11)}${fmt(r.prefill_ratio, 2).padStart(7)} |` +
        `${fmt(r.fulcrum?.gen_tokens_per_s, 2).padStart(22)}${fmt(r.llama_cpp?.gen_tokens_per_s, 2).padStart(11)}${fmt(r.decode_ratio, 2).padStart(7)} |` +
        `${pct(r.fulcrum_decode_of_limit).padStart(22)}${pct(r.llama_cpp_decode_of_limit).padStart(11)} |` +
        `${mib(r.fulcrum?.peak_rss_bytes).padStart(22)}${mib(r.llama_cpp?.peak_rss_bytes).padStart(11)}${mib(r.kv_bytes).padStart(4)} | ${target(r)}`,
    );
  }
  lines.push('', 'memory make-up (MiB): baseline = node + engine library before the model; at end of run, model loaded: anon / model file / other files; largest anonymous mappings resident/size',
    'shape  type  thr engine    | baseline  load peak  peak | end RSS   anon  model file  other files | largest anon (resident/size)');
  for (const r of rows) {
    for (const [name, e] of [['fulcrum', r.fulcrum], ['llama.cpp', r.llama_cpp]] as const) {
      if (!e) continue;
      const m = e.memory;
      lines.push(
        `${r.shape.padEnd(6)} ${r.type.padEnd(5)} ${String(r.threads).padStart(3)} ${name.padEnd(9)} |` +
          `${mib(m.baseline_rss_bytes).padStart(9)}${mib(m.load_peak_rss_bytes).padStart(11)}${mib(m.peak_rss_bytes).padStart(6)} |` +
          `${mib(m.end.rss_bytes).padStart(8)}${mib(m.end.anon_bytes).padStart(7)}${mib(m.end.model_file_bytes).padStart(12)}${mib(m.end.other_file_bytes).padStart(13)} | ` +
          m.end.largest_anon.map((a) => `${mib(a.rss_bytes)}/${mib(a.size_bytes)}`).join(' '),
      );
    }
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  const dir = path.join(packageRoot(), 'bench-results');
  mkdirSync(dir, { recursive: true });
  const out = path.join(dir, `bench-cpu-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(out, `${JSON.stringify({ isa: kernels.isaLevel(), isaChoice: isa, llamaCpuVariant: llamaVariant ?? 'auto', promptTokens, genTokens, contextSize, rows }, null, 2)}\n`);
  process.stdout.write(`wrote ${out}\n`);
}

const child = process.argv[2] === CHILD_FLAG;
(child ? childMain(process.argv.slice(3)) : main()).catch((e: unknown) => {
  process.stderr.write(`bench-cpu${child ? ' (measurement process)' : ''}: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
});
