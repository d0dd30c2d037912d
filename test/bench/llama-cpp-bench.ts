// The same measurement as engine/runtime/bench.ts, on node-llama-cpp (llama.cpp's CPU backend):
// prefill of the same token ids, then greedy decode of N tokens, same thread count.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { packageRoot } from '../../engine/native/addon';
import { benchTokens } from '../../engine/runtime/bench';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;
const dynamicImport = new Function('m', 'return import(m)') as (m: string) => Promise<Any>;

let llamaPromise: Promise<Any> | undefined;
/** The node-llama-cpp package directory a measurement process imports. */
function nodeLlamaCppDir(): string {
  return process.env.FULCRUM_NODE_LLAMA_CPP ?? path.join(packageRoot(), 'node_modules', 'node-llama-cpp');
}
/** node-llama-cpp, or the copy FULCRUM_NODE_LLAMA_CPP names (one CPU level: llama-cpp-isa.ts). */
function nodeLlamaCpp(): Promise<Any> {
  const dir = process.env.FULCRUM_NODE_LLAMA_CPP;
  if (!dir) return dynamicImport('node-llama-cpp');
  const main = (JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { exports?: { '.'?: { import?: string; default?: string } }; main?: string });
  const entry = main.exports?.['.']?.import ?? main.exports?.['.']?.default ?? main.main ?? 'dist/index.js';
  return dynamicImport(pathToFileURL(path.join(dir, entry)).href);
}
function llama(): Promise<Any> {
  llamaPromise ??= nodeLlamaCpp().then((nlc) => nlc.getLlama({ gpu: false, build: 'never', logLevel: nlc.LlamaLogLevel.error }));
  return llamaPromise;
}

/** What llama.cpp loaded in this process: the answer to "which peer did we measure?". */
export interface PeerBackend {
  node_llama_cpp: string;
  /** Paths of the ggml CPU backend libraries mapped into this process (one: the level it chose). */
  cpu_libraries: string[];
  /** llama_print_system_info(): the CPU features that library was built for. */
  system_info: string;
}

/** The ggml CPU libraries in a /proc/<pid>/maps text, each path once. */
export function cpuLibrariesInMaps(maps: string): string[] {
  const paths = maps.split('\n').map((l) => l.trim().split(/\s+/).slice(5).join(' ')).filter((p) => /\/libggml-cpu[^/]*\.so$/.test(p));
  return [...new Set(paths)];
}

/** Loads llama.cpp if needed and says which CPU backend it loaded (from /proc/self/maps). */
export async function llamaCppBackend(): Promise<PeerBackend> {
  const l = await llama();
  const pkg = JSON.parse(readFileSync(path.join(nodeLlamaCppDir(), 'package.json'), 'utf8')) as { version?: string };
  return {
    node_llama_cpp: pkg.version ?? 'unknown',
    cpu_libraries: cpuLibrariesInMaps(readFileSync('/proc/self/maps', 'utf8')),
    system_info: String(l.systemInfo).trim(),
  };
}

export interface PeerResult {
  prompt_tokens_per_s: number;
  gen_tokens_per_s: number;
  /** KV cache cells the context was created with (node-llama-cpp pads the request up to a multiple of 256). */
  context_size: number;
  /** The threads node-llama-cpp says the context evaluated with (currentThreads, read after the run). */
  threads: number;
}

export interface PeerOptions {
  threads: number;
  promptTokens: number;
  genTokens: number;
  nVocab: number;
  /** KV cache cells; default prompt + gen + 8 (the decode loop feeds one extra input token). */
  contextSize?: number;
  /** Same contract as engine/runtime/bench.ts BenchOptions.probe. */
  probe?: (stage: 'loaded' | 'done') => void;
  /**
   * K and V cache type (default F16). Q8_0 is llama.cpp's `-ctk q8_0 -ctv q8_0`, which needs flash
   * attention (`-fa`): its quantized V cache is read only by the flash-attention kernel.
   */
  kvFormat?: 'F16' | 'Q8_0';
}

export async function benchLlamaCpp(file: string, opts: PeerOptions): Promise<PeerResult> {
  const l = await llama();
  const model = await l.loadModel({ modelPath: file });
  const context = await model.createContext({
    contextSize: opts.contextSize ?? opts.promptTokens + opts.genTokens + 8,
    batchSize: 512,
    threads: opts.threads,
    flashAttention: opts.kvFormat === 'Q8_0',
    ...(opts.kvFormat === 'Q8_0' ? { experimentalKvCacheKeyType: 'Q8_0' as const, experimentalKvCacheValueType: 'Q8_0' as const } : {}),
  });
  try {
    opts.probe?.('loaded');
    const seq = context.getSequence();
    const prompt = benchTokens(opts.promptTokens, opts.nVocab);
    // Warm-up (page in the weights), like the Fulcrum side.
    await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, 1));
    await seq.clearHistory();
    const t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(prompt);
    const t1 = performance.now();
    let n = 0;
    // Decode: one more input token, then greedy generation; every yielded token is one decode step.
    for await (const _t of seq.evaluate([prompt[prompt.length - 1]!], { temperature: 0 })) {
      if (++n >= opts.genTokens) break;
    }
    const t2 = performance.now();
    opts.probe?.('done');
    return {
      prompt_tokens_per_s: (opts.promptTokens / (t1 - t0)) * 1000,
      gen_tokens_per_s: (n / (t2 - t1)) * 1000,
      context_size: context.contextSize as number,
      threads: context.currentThreads as number,
    };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

/**
 * Prefill only: the time llama.cpp takes to evaluate `ids` from an empty cache (after a one-token
 * warm-up that pages the weights in), with `threads` threads and a batch of `batchSize`.
 */
export async function prefillLlamaCpp(file: string, ids: readonly number[], opts: { threads: number; batchSize: number }): Promise<{ ms: number; tokens_per_s: number }> {
  const l = await llama();
  const model = await l.loadModel({ modelPath: file });
  const context = await model.createContext({ contextSize: ids.length + 8, batchSize: opts.batchSize, threads: opts.threads, flashAttention: false });
  try {
    const seq = context.getSequence();
    await seq.evaluateWithoutGeneratingNewTokens([ids[0]!]);
    await seq.clearHistory();
    const t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens([...ids]);
    const ms = performance.now() - t0;
    return { ms, tokens_per_s: (ids.length / ms) * 1000 };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}
