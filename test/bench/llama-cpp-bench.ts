// The same measurement as engine/runtime/bench.ts, on node-llama-cpp (llama.cpp's CPU backend):
// prefill of the same token ids, then greedy decode of N tokens, same thread count.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { benchTokens } from '../../engine/runtime/bench';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;
const dynamicImport = new Function('m', 'return import(m)') as (m: string) => Promise<Any>;

let llamaPromise: Promise<Any> | undefined;
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

/** Loads node-llama-cpp's addon and CPU backend (what a process pays before any model). */
export async function loadLlamaCpp(): Promise<void> {
  await llama();
}

export interface PeerResult {
  prompt_tokens_per_s: number;
  gen_tokens_per_s: number;
  /** KV cache cells the context was created with (node-llama-cpp pads the request up to a multiple of 256). */
  context_size: number;
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
}

export async function benchLlamaCpp(file: string, opts: PeerOptions): Promise<PeerResult> {
  const l = await llama();
  const model = await l.loadModel({ modelPath: file });
  const context = await model.createContext({
    contextSize: opts.contextSize ?? opts.promptTokens + opts.genTokens + 8,
    batchSize: 512,
    threads: opts.threads,
    flashAttention: false,
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
    };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}
