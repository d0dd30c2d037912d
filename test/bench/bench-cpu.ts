// `npm run bench:cpu`: CPU prefill and decode throughput of Fulcrum against llama.cpp
// (node-llama-cpp, same file, same thread count, same KV cache size, flash attention off) on
// synthetic models of real shapes, plus decode as a fraction of the memory-bandwidth limit
// (measured read bandwidth ÷ bytes a token reads: weights, an MoE model's used experts only, and
// the KV cache at the decode's mean context), and each engine's peak resident
// memory against the target "Fulcrum's peak ≤ llama.cpp's + the KV cache". Every measurement runs
// in a fresh process of its own (bench-child.ts), one after the other, so each peak is that
// engine's alone. Prints a table and writes JSON under bench-results/.
//
// Within a row the engines alternate, Fulcrum, llama.cpp, Fulcrum, llama.cpp, … (--runs rounds,
// bench-rounds.ts), and each engine's figure is the median of its runs: a slow moment of a shared
// host hits both. Peer sanity (issue 25): the header names the CPU (model, flags, flags hash);
// each row says which llama.cpp CPU backend library the peer process had mapped and how many of
// its threads worked on which CPUs (and the same for Fulcrum's threads); every row's peer figure is
// kept per host in bench-results/peer-history.json (format at the top of peer-history.ts; key:
// CPU model + flags hash + ISA choice, and the row: shape, type, threads, prompt and decode
// lengths), and a figure more than 25 % from the previous one of the same row and host is flagged
// and the row measured again (one more round of both engines, up to twice, until the peer agrees
// with its history); the table then shows the median of all the row's runs and the notes both.
// History file, in short: { "format": "fulcrum-bench-cpu-peer-history/1", "hosts": { <host key>:
// { cpu, flags_sha256, isa, rows: { <row key>: [ { date, prompt_tokens_per_s, gen_tokens_per_s,
// runs, cpu_library, node_llama_cpp, flagged }, … newest last, 20 kept ] } } } }.
//
// Options: --quick (64-token prompt, 16 decoded), --prompt N, --gen N, --threads 1,2,
// --shapes 0.5B,1.3B, --types Q8_0,Q4_0,Q4_K,Q4_K_M (llama.cpp's mix), --runs N (rounds per row,
// default 3), --no-peer, --history FILE (default bench-results/peer-history.json),
// --isa native|avx2|avxvnni|avx512 (Fulcrum with FULCRUM_ISA, llama.cpp with only its CPU library of that
// level: llama-cpp-isa.ts).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { parseArgs } from '../../engine/cli/command';
import { GgmlType, ggmlTypeByName } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf';
import { bestReadBandwidth } from '../../engine/hardware/bench-native';
import { packageRoot } from '../../engine/native/addon';
import { nativeKernels } from '../../engine/native/model';
import { CHILD_FLAG, childMain, runBenchChild, type BenchEngine, type ChildMemory, type ChildResult } from './bench-child';
import { cpuLine, hostCpu } from './bench-host';
import { readHparams } from '../../engine/model/hparams';
import { formatBytesPerElement } from '../../engine/model/shape';
import { BENCH_SHAPES, BENCH_TYPE_LABELS, BENCH_TYPES, benchModelFile, benchTypeByLabel, unsupportedReason } from './bench-models';
import { alternationOrder, median } from './bench-rounds';
import { llamaCppEnvFor, llamaCpuVariant, type IsaChoice } from './llama-cpp-isa';
import {
  FLAG_LIMIT, flaggedFigures, historyRange, MAX_REMEASURES, peerDeviation, previousEntry, readHistory, recordEntry, rowKey, shouldRemeasure, withinRange,
  type HistoryEntry, type HistoryRange, type HostId, type PeerFigure, type RowId,
} from './peer-history';
import { formatPlacement, type PlacementSummary } from './thread-placement';

/** llama.cpp rounds its KV cache up to a multiple of 256 cells; both engines get that size. */
const KV_CELL_PAD = 256;

interface Row {
  shape: string;
  type: string;
  threads: number;
  skipped?: string;
  weight_bytes_per_token?: number;
  /** KV cache bytes a decoded token reads at the decode's mean context. */
  kv_bytes_per_token?: number;
  read_bandwidth_bytes_per_s?: number;
  /** KV cache positions both engines were given, and that cache's bytes (f16). */
  context_size?: number;
  kv_bytes?: number;
  fulcrum?: EngineRow;
  llama_cpp?: EngineRow;
  /** The peer's figure against its history on this host, and the re-measurements it led to. */
  peer_check?: PeerCheck;
  /** Fulcrum's peak RSS ≤ llama.cpp's + kv_bytes, and by how much (negative: over by that much). */
  memory_target_met?: boolean;
  memory_margin_bytes?: number;
  /** The same with each engine's baseline (node + its native library, no model) subtracted. */
  memory_net_margin_bytes?: number;
  prefill_ratio?: number;
  decode_ratio?: number;
  fulcrum_decode_of_limit?: number;
  llama_cpp_decode_of_limit?: number;
  /**
   * Decode against the read bandwidth probed just before and just after the run (their mean), the
   * median over the engine's runs: the limit above is the best moment of the whole bench, which a
   * shared host reaches only now and then (this 2-vCPU VM: single probes 12.8-16.5 GB/s at one
   * thread within a minute), so it mixes the kernels' distance from the memory with the host's.
   */
  fulcrum_decode_of_nearby?: number;
  llama_cpp_decode_of_nearby?: number;
  /** The probes around each run, per engine, in the order the runs went (bytes/s, mean of before and after). */
  nearby_read_bandwidth_bytes_per_s?: { fulcrum: number[]; 'llama.cpp': number[] };
}

interface EngineRow {
  /** Medians over the runs. */
  prompt_tokens_per_s: number;
  gen_tokens_per_s: number;
  /** Every run's figures, in the order they ran. */
  runs: PeerFigure[];
  /** The first run's process: peak resident set (VmHWM), resident set before the model, make-up. */
  peak_rss_bytes: number;
  baseline_rss_bytes: number;
  memory: ChildMemory;
  /** The threads the engine reported it evaluated with, first run. */
  engine_threads: number;
  /** Busy threads and their CPUs, per run (sampled by the parent over the timed part). */
  placement: (PlacementSummary | null)[];
  /** Fulcrum: its kernels' ISA level. llama.cpp: the CPU backend libraries its process had mapped. */
  isa_level?: string;
  cpu_libraries?: string[];
  node_llama_cpp?: string;
  system_info?: string;
}

interface PeerCheck {
  previous?: HistoryEntry;
  /** The row's figures on this host before this run (historyRange). */
  range?: HistoryRange;
  /** The row's peer figure (median of the first rounds), then each re-measurement's figure. */
  measurements: PeerFigure[];
  /** Which figures of the first measurement were more than FLAG_LIMIT from the previous one. */
  flagged: ('prefill' | 'decode')[];
  /** The last measurement still flagged after the re-measurements. */
  still_flagged: boolean;
}

const figure = (r: ChildResult): PeerFigure => ({ prompt_tokens_per_s: r.prompt_tokens_per_s, gen_tokens_per_s: r.gen_tokens_per_s });
/** The medians of some runs' figures. */
const medianFigure = (results: ChildResult[]): PeerFigure => ({
  prompt_tokens_per_s: median(results.map((r) => r.prompt_tokens_per_s)),
  gen_tokens_per_s: median(results.map((r) => r.gen_tokens_per_s)),
});

/**
 * Which decode GEMVs prefetch in software at the ISA the Fulcrum children run: the per-CPU choice,
 * and the AVX-512 Q6_K and Q5_0 GEMVs' own (core/isa.h KernelChoice::q6_k_gemv_prefetch_bytes,
 * q5_0_gemv_prefetch) when they differ.
 */
type Prefetch = 'software' | 'hardware';
interface PrefetchChoice { gemv: Prefetch; q6k: Prefetch; q5_0: Prefetch; streams: 1 | 4; streamsK: 1 | 2 }

function prefetchChoice(isa: IsaChoice): PrefetchChoice {
  const kernels = nativeKernels();
  const childIsa = isa === 'native' ? kernels.isaLevel() : isa;
  const avx512 = childIsa === 'avx512';
  return {
    gemv: kernels.gemvPrefetch(), q6k: kernels.gemvPrefetchQ6K(childIsa as 'avx2' | 'avxvnni' | 'avx512'), q5_0: avx512 ? kernels.gemvPrefetchQ5_0() : kernels.gemvPrefetch(),
    streams: kernels.gemvStreams(), streamsK: kernels.gemvStreamsK(),
  };
}

function formatPrefetch(choice: PrefetchChoice): string {
  const own = [['Q6_K', choice.q6k], ['Q5_0', choice.q5_0]].filter(([, p]) => p !== choice.gemv).map(([t, p]) => `${t}: ${p}`);
  const prefetch = own.length === 0 ? `${choice.gemv} prefetch` : `${choice.gemv} prefetch (${own.join(', ')})`;
  // The stream count only matters to the 32-element formats' software-prefetched walks.
  const softwareWalks = choice.gemv === 'software' || choice.q5_0 === 'software';
  if (!softwareWalks) return prefetch;
  const walks = `${choice.streams === 4 ? 'four streams' : "each kernel's own streams"} in the 32-element formats' software-prefetched walks`;
  return choice.gemv === 'software' ? `${prefetch}, ${walks}, ${choice.streamsK === 2 ? 'two streams' : 'one stream'} in Q4_K's, Q5_K's and Q6_K's` : `${prefetch}, ${walks}`;
}

function engineRow(results: ChildResult[]): EngineRow {
  const first = results[0]!;
  return {
    ...medianFigure(results),
    runs: results.map(figure),
    peak_rss_bytes: first.memory.peak_rss_bytes,
    baseline_rss_bytes: first.memory.baseline_rss_bytes,
    memory: first.memory,
    engine_threads: first.engine_threads,
    placement: results.map((r) => r.placement ?? null),
    isa_level: first.isa_level,
    cpu_libraries: first.backend?.cpu_libraries,
    node_llama_cpp: first.backend?.node_llama_cpp,
    system_info: first.backend?.system_info,
  };
}

/** Bytes a decode step streams: every tensor once, except the embedding (one row is read). */
/**
 * Bytes one decoded token reads: every weight matrix once (the embedding row aside, unless the
 * head is tied to it), of an MoE model's expert tensors only the experts a token runs
 * (expert_used_count of expert_count), and the KV cache of every layer at the decode's mean
 * context (prompt + gen / 2 positions, f16 K and V).
 */
function bytesPerToken(file: string, promptTokens: number, genTokens: number, kvFormat: 'F16' | 'Q8_0'): { weights: number; kv: number } {
  const g = readGguf(file);
  const hp = readHparams(g);
  const tied = !g.tensors.some((t) => t.name === 'output.weight');
  const expertShare = hp.nExpert > 0 ? hp.nExpertUsed / hp.nExpert : 1;
  const weights = g.tensors.reduce((s, t) => s + (t.name === 'token_embd.weight' && !tied ? 0 : /_exps\.weight$/.test(t.name) ? t.byteSize * expertShare : t.byteSize), 0);
  const kv = hp.nLayers * 2 * hp.nKvHeads * hp.headDim * formatBytesPerElement(kvFormat) * (promptTokens + genTokens / 2);
  return { weights, kv };
}

const signedPct = (v: number): string => `${v >= 0 ? '+' : ''}${(v * 100).toFixed(0)}%`;
const tokS = (f: PeerFigure): string => `prefill ${f.prompt_tokens_per_s.toFixed(1)}, decode ${f.gen_tokens_per_s.toFixed(2)} tok/s`;

/** "prefill 151.0 tok/s (-60%), decode 53.00 tok/s (-47%) against 380.1 / 99.50 of <date>" */
function againstPrevious(previous: HistoryEntry, now: PeerFigure): string {
  const d = peerDeviation(previous, now);
  return `prefill ${now.prompt_tokens_per_s.toFixed(1)} tok/s (${signedPct(d.prefill)}), decode ${now.gen_tokens_per_s.toFixed(2)} tok/s (${signedPct(d.decode)}) ` +
    `against ${previous.prompt_tokens_per_s.toFixed(1)} / ${previous.gen_tokens_per_s.toFixed(2)} of ${previous.date}`;
}

// Where a flagged figure sits in the peer's own spread on this host: left it, or back inside it.
function againstRange(range: HistoryRange | undefined, now: PeerFigure): string {
  if (!range) return 'no earlier figures on this host';
  const w = withinRange(range, now);
  const side = (inside: boolean) => (inside ? 'inside' : 'outside');
  return `this host's ${range.figures} earlier figure(s): prefill ${range.prefill[0].toFixed(1)}-${range.prefill[1].toFixed(1)} (${side(w.prefill)}), ` +
    `decode ${range.decode[0].toFixed(2)}-${range.decode[1].toFixed(2)} (${side(w.decode)})`;
}

const baseName = (p: string): string => p.slice(p.lastIndexOf('/') + 1);

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2), ['prompt', 'gen', 'threads', 'shapes', 'types', 'isa', 'runs', 'history', 'kv-format'], ['quick', 'no-peer']);
  const isa = (args.options.get('isa') ?? 'native') as IsaChoice;
  if (!['native', 'avx2', 'avxvnni', 'avx512'].includes(isa)) throw new Error(`--isa must be native, avx2, avxvnni or avx512, got ${isa}`);
  const fulcrumEnv: Record<string, string> = isa === 'native' ? {} : { FULCRUM_ISA: isa };
  const llamaVariant = llamaCpuVariant(isa);
  const llamaEnv = llamaCppEnvFor(llamaVariant);
  const cpu = hostCpu();
  const prefetch = prefetchChoice(isa);
  process.stdout.write(`${cpuLine(cpu)}\n` +
    `ISA ${isa}: Fulcrum ${isa === 'native' ? `${nativeKernels().isaLevel()} (its own choice)` : `FULCRUM_ISA=${isa}`} with ${formatPrefetch(prefetch)} in the decode GEMVs, llama.cpp ${llamaVariant ? `libggml-cpu-${llamaVariant}.so only` : 'its own choice of CPU library'}\n`);
  const quick = args.options.has('quick');
  const promptTokens = Number(args.options.get('prompt') ?? (quick ? 64 : 512));
  const genTokens = Number(args.options.get('gen') ?? (quick ? 16 : 128));
  const runs = Number(args.options.get('runs') ?? 3);
  // Both engines' KV cache: f16 (default) or q8_0 (llama.cpp then runs flash attention, which its
  // quantized V cache needs).
  const kvFormatArg = (args.options.get('kv-format') ?? 'f16').toUpperCase();
  if (kvFormatArg !== 'F16' && kvFormatArg !== 'Q8_0') throw new Error(`--kv-format must be f16 or q8_0, got ${args.options.get('kv-format')}`);
  const kvFormat: 'F16' | 'Q8_0' = kvFormatArg;
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a whole number ≥ 1, got ${args.options.get('runs')}`);
  const threadList = (args.options.get('threads') ?? '1,2').split(',').map(Number);
  const shapeNames = args.options.get('shapes')?.split(',');
  const shapes = BENCH_SHAPES.filter((s) => !shapeNames || shapeNames.includes(s.label));
  const types = args.options.get('types')?.split(',').map((n) => {
    const t = benchTypeByLabel(n) ?? (ggmlTypeByName(n) ? { label: n, type: ggmlTypeByName(n)!.type as GgmlType } : undefined);
    if (!t) throw new Error(`unknown type ${n} (one of ${BENCH_TYPE_LABELS.join(', ')} or a GGML type name)`);
    return t;
  }) ?? BENCH_TYPES;
  const peer = !args.options.has('no-peer');
  const resultsDir = path.join(packageRoot(), 'bench-results');
  const historyFile = path.resolve(args.options.get('history') ?? path.join(resultsDir, 'peer-history.json'));
  const history = readHistory(historyFile);
  const host: HostId = { cpu: cpu.model, flagsHash: cpu.flagsHash, isa };
  // The decode loop of llama-cpp-bench.ts feeds one token beyond prompt + gen; +8 leaves room.
  const contextSize = Math.ceil((promptTokens + genTokens + 8) / KV_CELL_PAD) * KV_CELL_PAD;

  // The parent's kernels (bandwidth): at the ISA asked for, like the measured engine.
  const kernels = nativeKernels();
  // The limit is the best read bandwidth the machine showed in this run: a shared host's probe
  // varies between runs and minutes (seen on one VM: 21-31 GB/s at one thread), so each thread
  // count is probed at the start and again after every row of it, and the highest counts.
  const bandwidth = new Map<number, number>();
  const probes = new Map<number, number>();
  const probe = async (t: number) => {
    bandwidth.set(t, Math.max(bandwidth.get(t) ?? 0, await bestReadBandwidth(512 << 20, t, 9)));
    probes.set(t, (probes.get(t) ?? 0) + 1);
  };
  for (const t of threadList) await probe(t);
  // The probes around each run (fewer rounds: two of every layout); they count toward the limit too.
  const nearbyProbe = async (t: number) => {
    const b = await bestReadBandwidth(512 << 20, t, 2);
    bandwidth.set(t, Math.max(bandwidth.get(t)!, b));
    return b;
  };

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
        const label = `${shape.label} ${type.label} ${threads}T`;
        process.stderr.write(`${label}…\n`);
        const file = benchModelFile(shape, type);
        const bytes = bytesPerToken(file, promptTokens, genTokens, kvFormat);
        row.weight_bytes_per_token = bytes.weights;
        row.kv_bytes_per_token = bytes.kv;
        const req = { model: file, threads, promptTokens, genTokens, contextSize, kvFormat };
        const rowId: RowId = { shape: shape.label, type: type.label, threads, promptTokens, genTokens, ...(kvFormat !== 'F16' ? { kvFormat } : {}) };
        const done: Record<BenchEngine, ChildResult[]> = { fulcrum: [], 'llama.cpp': [] };
        const nearby: Record<BenchEngine, number[]> = { fulcrum: [], 'llama.cpp': [] };
        const measure = async (order: BenchEngine[]) => {
          for (const engine of order) {
            const before = await nearbyProbe(threads);
            done[engine].push(await runBenchChild({ ...req, engine }, engine === 'fulcrum' ? fulcrumEnv : llamaEnv));
            nearby[engine].push((before + (await nearbyProbe(threads))) / 2);
          }
        };
        await measure(alternationOrder(runs, peer));
        if (peer) {
          const previous = previousEntry(history, host, rowId);
          const first = medianFigure(done['llama.cpp']);
          const check: PeerCheck = { previous, range: historyRange(history, host, rowId), measurements: [first], flagged: flaggedFigures(previous, first), still_flagged: false };
          while (shouldRemeasure(previous, check.measurements)) {
            const n = check.measurements.length;
            process.stdout.write(`!! PEER FLAG ${label}: llama.cpp ${againstPrevious(previous!, check.measurements[n - 1]!)}: ` +
              `more than ${FLAG_LIMIT * 100} % away (${againstRange(check.range, check.measurements[n - 1]!)}); re-measuring the row (${n} of ${MAX_REMEASURES})\n`);
            const before = done['llama.cpp'].length;
            await measure(alternationOrder(1, true));
            check.measurements.push(medianFigure(done['llama.cpp'].slice(before)));
          }
          const last = check.measurements[check.measurements.length - 1]!;
          check.still_flagged = flaggedFigures(previous, last).length > 0;
          if (check.flagged.length > 0) {
            process.stdout.write(`!! PEER FLAG ${label}: re-measured ${check.measurements.slice(1).map(tokS).join('; ')}: ` +
              `${check.still_flagged ? `still more than ${FLAG_LIMIT * 100} % from the previous figure` : `back within ${FLAG_LIMIT * 100} % of the previous figure`}\n`);
          }
          row.peer_check = check;
        }
        const f = engineRow(done.fulcrum);
        row.fulcrum = f;
        row.nearby_read_bandwidth_bytes_per_s = nearby;
        const tokenBytes = bytes.weights + bytes.kv;
        const ofNearby = (e: BenchEngine) => median(done[e].map((r, i) => (r.gen_tokens_per_s * tokenBytes) / nearby[e][i]!));
        row.fulcrum_decode_of_nearby = ofNearby('fulcrum');
        if (peer) row.llama_cpp_decode_of_nearby = ofNearby('llama.cpp');
        row.context_size = f.memory.context_size;
        row.kv_bytes = f.memory.kv_bytes;
        if (peer) {
          const l = engineRow(done['llama.cpp']);
          if (l.memory.context_size !== f.memory.context_size) {
            throw new Error(`${file}: llama.cpp made a KV cache of ${l.memory.context_size} cells, Fulcrum ${f.memory.context_size}; the memory comparison needs the same`);
          }
          row.llama_cpp = l;
          row.prefill_ratio = f.prompt_tokens_per_s / l.prompt_tokens_per_s;
          row.decode_ratio = f.gen_tokens_per_s / l.gen_tokens_per_s;
          row.memory_margin_bytes = l.peak_rss_bytes + f.memory.kv_bytes - f.peak_rss_bytes;
          row.memory_target_met = row.memory_margin_bytes >= 0;
          row.memory_net_margin_bytes = l.peak_rss_bytes - l.baseline_rss_bytes + f.memory.kv_bytes - (f.peak_rss_bytes - f.baseline_rss_bytes);
          recordEntry(history, host, rowId, {
            date: new Date().toISOString(),
            prompt_tokens_per_s: l.prompt_tokens_per_s,
            gen_tokens_per_s: l.gen_tokens_per_s,
            runs: l.runs.length,
            cpu_library: l.cpu_libraries?.length === 1 ? baseName(l.cpu_libraries[0]!) : null,
            node_llama_cpp: l.node_llama_cpp ?? 'unknown',
            flagged: (row.peer_check?.flagged.length ?? 0) > 0,
          });
          // Written after every row: an interrupted run keeps what it measured.
          mkdirSync(path.dirname(historyFile), { recursive: true });
          writeFileSync(historyFile, `${JSON.stringify(history, null, 2)}\n`);
        }
        await probe(threads);
      }
    }
  }
  for (const row of rows) {
    if (row.skipped || !row.fulcrum || row.weight_bytes_per_token === undefined) continue;
    const limit = bandwidth.get(row.threads)! / (row.weight_bytes_per_token + (row.kv_bytes_per_token ?? 0));
    row.read_bandwidth_bytes_per_s = bandwidth.get(row.threads)!;
    row.fulcrum_decode_of_limit = row.fulcrum.gen_tokens_per_s / limit;
    if (row.llama_cpp) row.llama_cpp_decode_of_limit = row.llama_cpp.gen_tokens_per_s / limit;
  }

  // How far the best moment is from what the host usually gave: on a shared host the limit (the
  // best probe) can sit 40 % above the probes taken around the runs (this 2-vCPU Zen 3 VM: 2T best
  // 31.4 GB/s, the probes around the runs 17.6-30.0 with a median of 22.9), and decode/limit then
  // measures the host's quiet moments as much as the kernels. Median and lowest of the probes
  // around each run, per thread count.
  const probeSpread = new Map<number, { median: number; min: number; count: number }>();
  for (const t of threadList) {
    const around = rows.filter((r) => r.threads === t).flatMap((r) => [...(r.nearby_read_bandwidth_bytes_per_s?.fulcrum ?? []), ...(r.nearby_read_bandwidth_bytes_per_s?.['llama.cpp'] ?? [])]);
    if (around.length > 0) probeSpread.set(t, { median: median(around), min: Math.min(...around), count: around.length });
  }
  const spread = (t: number) => {
    const p = probeSpread.get(t);
    return p ? `; around the runs median ${(p.median / 1e9).toFixed(1)}, lowest ${(p.min / 1e9).toFixed(1)} of ${p.count}` : '';
  };
  const fmt = (v: number | undefined, d = 1) => (v === undefined ? '—' : v.toFixed(d));
  const pct = (v: number | undefined) => (v === undefined ? '—' : `${(v * 100).toFixed(0)}%`);
  const mib = (v: number | undefined) => (v === undefined ? '—' : (v / 2 ** 20).toFixed(0));
  const target = (r: Row) =>
    r.memory_margin_bytes === undefined ? '—' : `${r.memory_target_met ? 'yes' : 'no'} (${r.memory_margin_bytes >= 0 ? '+' : ''}${mib(r.memory_margin_bytes)})`;
  const lines = [
    `prompt ${promptTokens} tokens, decode ${genTokens} tokens, KV cache ${contextSize} positions (both engines, ${kvFormat.toLowerCase()}${kvFormat === 'Q8_0' ? ', llama.cpp with flash attention' : ''}); ` +
      `${runs} alternating round(s) per row, medians shown (a flagged row has its re-measurements in the median too); ` +
      `read bandwidth (best of the run's probes: ${threadList.map((t) => `${t}T ${(bandwidth.get(t)! / 1e9).toFixed(1)} GB/s (${probes.get(t)} full probes and those around each run${spread(t)})`).join(', ')}; ` +
      `decode/limit is against that best, decode/nearby against the probes just before and after each run (median over the runs)`,
    'shape  type  thr | prefill tok/s  fulcrum  llama.cpp  ratio | decode tok/s  fulcrum  llama.cpp  ratio | decode/limit  fulcrum  llama.cpp' +
      ' | decode/nearby  fulcrum  llama.cpp' +
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
        `${pct(r.fulcrum_decode_of_nearby).padStart(23)}${pct(r.llama_cpp_decode_of_nearby).padStart(11)} |` +
        `${mib(r.fulcrum?.peak_rss_bytes).padStart(22)}${mib(r.llama_cpp?.peak_rss_bytes).padStart(11)}${mib(r.kv_bytes).padStart(4)} | ${target(r)}` +
        (r.peer_check?.flagged.length ? '  !! peer flagged (see peer sanity)' : ''),
    );
  }
  lines.push('', `peer sanity: llama.cpp's CPU backend as mapped in its process, the CPUs each engine's first run used over its timed part and its busy threads (≥ 10 % of a CPU) with their CPUs, ` +
    `the peer against its history (${historyFile})`);
  for (const r of rows) {
    if (r.skipped || !r.fulcrum) continue;
    const head = `${r.shape.padEnd(6)} ${r.type.padEnd(5)} ${String(r.threads).padStart(3)} |`;
    const runsOf = (e: EngineRow) => `prefill ${e.runs.map((x) => x.prompt_tokens_per_s.toFixed(1)).join(' ')}, decode ${e.runs.map((x) => x.gen_tokens_per_s.toFixed(2)).join(' ')}`;
    const threadsOf = (e: EngineRow) => {
      const p = e.placement[0];
      if (!p) return `${e.engine_threads} set; not sampled (the run ended before the parent saw its marks)`;
      // A process that had clearly fewer CPUs than threads asked ran slower than the row says it
      // measures: a loaded host, or an engine that did not start its threads. More can be node's own
      // (its main thread feeding tokens, GC) and is shown as it is.
      const set = `${e.engine_threads === r.threads ? '' : '!! '}${e.engine_threads} set`;
      return `${set}; ${p.processCpus < 0.75 * r.threads ? `!! ${p.processCpus.toFixed(2)} CPUs used where ${r.threads} thread(s) asked: ` : ''}${formatPlacement(p)}`;
    };
    lines.push(`${head} fulcrum   ${r.fulcrum.isa_level ?? '?'} kernels; runs ${runsOf(r.fulcrum)}`, `${' '.repeat(head.length)} fulcrum   threads: ${threadsOf(r.fulcrum)}`);
    const l = r.llama_cpp;
    if (!l) continue;
    const libs = l.cpu_libraries ?? [];
    const expected = llamaVariant ? `libggml-cpu-${llamaVariant}.so` : undefined;
    const libNote = libs.length !== 1 ? `!! ${libs.length} CPU libraries mapped: ${libs.join(', ') || 'none'}`
      : expected && baseName(libs[0]!) !== expected ? `!! ${libs[0]} loaded where ${expected} was asked` : libs[0]!;
    const c = r.peer_check;
    const lib = libs.length === 1 ? baseName(libs[0]!) : null;
    // A different library or package version explains a flag before the host does.
    const changes = !c?.previous ? [] : [
      ...(c.previous.cpu_library !== lib ? [`${c.previous.cpu_library ?? 'no single library'} → ${lib ?? 'no single library'}`] : []),
      ...(c.previous.node_llama_cpp !== l.node_llama_cpp ? [`node-llama-cpp ${c.previous.node_llama_cpp} → ${l.node_llama_cpp ?? '?'}`] : []),
    ];
    const changed = changes.length ? `; !! the peer changed since: ${changes.join(', ')}` : '';
    const hist = !c ? '' : !c.previous ? 'no previous figure for this row on this host'
      : c.flagged.length === 0 ? `previous ${c.previous.prompt_tokens_per_s.toFixed(1)} / ${c.previous.gen_tokens_per_s.toFixed(2)} tok/s (${c.previous.date}): within ${FLAG_LIMIT * 100} %`
      : `!! FLAGGED (${c.flagged.join(', ')}): first ${againstPrevious(c.previous, c.measurements[0]!)} (${againstRange(c.range, c.measurements[0]!)}); ` +
        `re-measured ${c.measurements.slice(1).map(tokS).join('; ')}; ${c.still_flagged ? 'still away' : 'back within range'}`;
    const histLine = `${hist}${changed}`;
    lines.push(`${' '.repeat(head.length)} llama.cpp ${libNote} (node-llama-cpp ${l.node_llama_cpp ?? '?'}); runs ${runsOf(l)}`,
      `${' '.repeat(head.length)} llama.cpp threads: ${threadsOf(l)}`,
      `${' '.repeat(head.length)} llama.cpp history: ${histLine}`);
  }
  const systemInfo = rows.find((r) => r.llama_cpp?.system_info)?.llama_cpp?.system_info;
  if (systemInfo) lines.push(`llama.cpp system info: ${systemInfo}`);
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
  mkdirSync(resultsDir, { recursive: true });
  const out = path.join(resultsDir, `bench-cpu-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(out, `${JSON.stringify({
    cpu: { model: cpu.model, flags_sha256: cpu.flagsHash, logical_cpus: cpu.logicalCpus, flags: cpu.flags },
    isa: kernels.isaLevel(), gemvPrefetch: kernels.gemvPrefetch(), gemvPrefetchQ6K: prefetch.q6k, gemvPrefetchQ5_0: prefetch.q5_0, gemvStreams: prefetch.streams, gemvStreamsK: prefetch.streamsK, isaChoice: isa, llamaCpuVariant: llamaVariant ?? 'auto', promptTokens, genTokens, contextSize, kvFormat, runs,
    // Per thread count (a row's read_bandwidth_bytes_per_s is its `best`).
    read_probe_spread_bytes_per_s: Object.fromEntries(threadList.map((t) => [`${t}T`, {
      best: bandwidth.get(t), around_runs_median: probeSpread.get(t)?.median, around_runs_lowest: probeSpread.get(t)?.min,
    }])),
    rows,
  }, null, 2)}\n`);
  process.stdout.write(`wrote ${out}${peer ? `; peer history ${historyFile}` : ''}\n`);
}

const child = process.argv[2] === CHILD_FLAG;
(child ? childMain(process.argv.slice(3)) : main()).catch((e: unknown) => {
  process.stderr.write(`bench-cpu${child ? ' (measurement process)' : ''}: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
});
