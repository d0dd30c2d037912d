// One measurement of `npm run bench:cpu` (one engine, one model file, one thread count) in a
// process of its own, so that the peak resident set it reports is that engine's alone: the
// parent starts it (runBenchChild), it prints one JSON line (childMain) and exits.
//
// Memory is read from /proc/self: the resident set at the start, after the engine's library is
// loaded (the baseline: node, V8, the addon, no model), after the model is loaded, and at the end
// of the timed run while the model is still loaded (with its make-up: model file pages,
// anonymous memory, the largest anonymous mappings); the peak is VmHWM read last.
//
// The child also prints a mark line on stdout when the model is loaded and when the timed run is
// done; between the two the parent samples the child's threads (thread-placement.ts), so the
// table can say how many threads each engine really ran and on which CPUs. The llama.cpp child
// reports which CPU backend library it loaded (llama-cpp-bench.ts llamaCppBackend).
import { spawn } from 'node:child_process';

import { readGguf } from '../../engine/model/gguf';
import { readHparams } from '../../engine/model/hparams';
import { nativeKernels } from '../../engine/native/model';
import { benchModel, kvCacheBytes } from '../../engine/runtime/bench';
import { benchLlamaCpp, llamaCppBackend, type PeerBackend } from './llama-cpp-bench';
import { mappingBreakdown, residentSet, type MappingBreakdown, type ResidentSet } from './proc-memory';
import { ThreadSampler, type PlacementSummary } from './thread-placement';

/** The first argument that makes bench-cpu's entry point run one measurement instead of the table. */
export const CHILD_FLAG = '--bench-child';

export type BenchEngine = 'fulcrum' | 'llama.cpp';

export interface ChildRequest {
  engine: BenchEngine;
  model: string;
  threads: number;
  promptTokens: number;
  genTokens: number;
  /** KV cache positions, the same for both engines. */
  contextSize: number;
  /** Both engines' KV cache format (default F16); llama.cpp runs flash attention with Q8_0 (its quantized V cache needs it). */
  kvFormat?: 'F16' | 'Q8_0';
}

export interface ChildMemory {
  /** VmRSS as the child starts: node, V8 and the bundled benchmark code. */
  start_rss_bytes: number;
  /** VmRSS once the engine's native library is loaded, before the model: what to subtract for "the engine's own". */
  baseline_rss_bytes: number;
  /** The baseline's make-up (anonymous / file pages). */
  baseline: ResidentSet;
  /** VmHWM once the model is loaded (weights placed, KV cache and buffers allocated), before any token. */
  load_peak_rss_bytes: number;
  /** VmHWM at the very end: the process's peak. */
  peak_rss_bytes: number;
  /** KV cache positions the engine actually allocated, and that cache's size (in the row's KV format, from the GGUF hparams). */
  context_size: number;
  kv_bytes: number;
  /** The resident set right after the timed run, model still loaded, and how it is made up. */
  end: MappingBreakdown;
}

export interface ChildResult {
  engine: BenchEngine;
  prompt_tokens_per_s: number;
  gen_tokens_per_s: number;
  memory: ChildMemory;
  /** The threads the engine says it evaluated with (Fulcrum: its pool; llama.cpp: the context's currentThreads). */
  engine_threads: number;
  /** Fulcrum: the kernels' ISA level. */
  isa_level?: string;
  /** llama.cpp: the CPU backend it loaded. */
  backend?: PeerBackend;
  /** Set by the parent: the child's threads sampled over its timed part (warm-up included). */
  placement?: PlacementSummary;
}

/** The line a child prints when it reaches a stage; the parent starts and stops sampling on them. */
const MARK = '#bench-mark ';

function parseRequest(json: string | undefined): ChildRequest {
  if (json === undefined) throw new Error(`${CHILD_FLAG} needs a JSON request argument`);
  const r = JSON.parse(json) as Partial<ChildRequest>;
  const ints = ['threads', 'promptTokens', 'genTokens', 'contextSize'] as const;
  for (const k of ints) {
    if (!Number.isInteger(r[k]) || r[k]! < 0) throw new Error(`${CHILD_FLAG}: '${k}' must be a non-negative integer, got ${JSON.stringify(r[k])}`);
  }
  if (r.engine !== 'fulcrum' && r.engine !== 'llama.cpp') throw new Error(`${CHILD_FLAG}: unknown engine ${JSON.stringify(r.engine)}`);
  if (typeof r.model !== 'string') throw new Error(`${CHILD_FLAG}: 'model' must be a file path`);
  if (r.kvFormat !== undefined && r.kvFormat !== 'F16' && r.kvFormat !== 'Q8_0') throw new Error(`${CHILD_FLAG}: 'kvFormat' must be F16 or Q8_0, got ${JSON.stringify(r.kvFormat)}`);
  return r as ChildRequest;
}

/** Runs in the child: one measurement, one JSON line on stdout. */
export async function childMain(argv: string[]): Promise<void> {
  const start = residentSet().rss_bytes;
  const req = parseRequest(argv[0]);
  const hp = readHparams(readGguf(req.model));
  let baseline: ResidentSet | undefined;
  let loadPeak = 0;
  let end: MappingBreakdown | undefined;
  const probe = (stage: 'loaded' | 'done'): void => {
    // stdout to a pipe is synchronous on Linux: the parent sees the mark before the run goes on.
    // The mark comes first at 'done' so that reading the mappings is outside the sampled window.
    if (stage === 'loaded') {
      loadPeak = residentSet().peak_rss_bytes;
      process.stdout.write(`${MARK}loaded\n`);
    } else {
      process.stdout.write(`${MARK}done\n`);
      end = mappingBreakdown(req.model);
    }
  };
  const kvFormat = req.kvFormat ?? 'F16';
  const opts = { threads: req.threads, promptTokens: req.promptTokens, genTokens: req.genTokens, kvFormat, probe };
  let speed: { prompt_tokens_per_s: number; gen_tokens_per_s: number; threads: number };
  let contextSize: number;
  let isaLevel: string | undefined;
  let backend: PeerBackend | undefined;
  if (req.engine === 'fulcrum') {
    isaLevel = nativeKernels().isaLevel(); // loads the addon
    baseline = residentSet();
    const r = await benchModel(req.model, { ...opts, contextLength: req.contextSize });
    speed = r;
    contextSize = r.context_length;
  } else {
    backend = await llamaCppBackend(); // loads the addon and its CPU backend
    baseline = residentSet();
    const r = await benchLlamaCpp(req.model, { ...opts, contextSize: req.contextSize, nVocab: hp.nVocab });
    speed = r;
    contextSize = r.context_size;
  }
  if (!end) throw new Error(`${req.engine} bench did not report the end of its run`);
  const result: ChildResult = {
    engine: req.engine,
    prompt_tokens_per_s: speed.prompt_tokens_per_s,
    gen_tokens_per_s: speed.gen_tokens_per_s,
    memory: {
      start_rss_bytes: start,
      baseline_rss_bytes: baseline.rss_bytes,
      baseline,
      load_peak_rss_bytes: loadPeak,
      peak_rss_bytes: residentSet().peak_rss_bytes,
      context_size: contextSize,
      kv_bytes: kvCacheBytes(hp, contextSize, kvFormat),
      end,
    },
    engine_threads: speed.threads,
    isa_level: isaLevel,
    backend,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/**
 * Runs one measurement in a fresh node process (this same entry point, with the same node flags,
 * e.g. `--import tsx`) and returns its result. Its stderr goes to ours.
 */
export function runBenchChild(req: ChildRequest, env: Record<string, string> = {}): Promise<ChildResult> {
  const entry = process.argv[1];
  if (!entry) throw new Error('bench: cannot tell which script to start the measurement process from');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, entry, CHILD_FLAG, JSON.stringify(req)], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
    let out = '';
    let scanned = 0;
    let placement: PlacementSummary | undefined;
    const sampler = child.pid === undefined ? undefined : new ThreadSampler(child.pid);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => {
      out += d;
      // Marks are whole lines; look at the lines completed since the last look.
      const upTo = out.lastIndexOf('\n') + 1;
      for (const line of out.slice(scanned, upTo).split('\n')) {
        if (line === `${MARK}loaded`) sampler?.start();
        if (line === `${MARK}done`) placement = sampler?.stop();
      }
      scanned = Math.max(scanned, upTo);
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      placement ??= sampler?.stop();
      const what = `${req.engine} on ${req.model}, ${req.threads} thread(s)`;
      if (code !== 0) return reject(new Error(`measurement process (${what}) ended with ${signal ?? `exit code ${code}`}`));
      // The result is the last line; an engine may print its own lines before it.
      const last = out.trimEnd().split('\n').pop() ?? '';
      try {
        resolve({ ...(JSON.parse(last) as ChildResult), placement });
      } catch {
        reject(new Error(`measurement process (${what}) printed no JSON result; its last line: ${JSON.stringify(last.slice(0, 200))}`));
      }
    });
  });
}
