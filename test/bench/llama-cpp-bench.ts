// The same measurement as engine/runtime/bench.ts, on node-llama-cpp (llama.cpp's CPU backend):
// prefill of the same token ids, then greedy decode of N tokens, same thread count.
import { benchTokens } from '../../engine/runtime/bench';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;
const dynamicImport = new Function('m', 'return import(m)') as (m: string) => Promise<Any>;

let llamaPromise: Promise<Any> | undefined;
function llama(): Promise<Any> {
  llamaPromise ??= dynamicImport('node-llama-cpp').then((nlc) => nlc.getLlama({ gpu: false, build: 'never', logLevel: nlc.LlamaLogLevel.error }));
  return llamaPromise;
}

export interface PeerResult {
  prompt_tokens_per_s: number;
  gen_tokens_per_s: number;
}

export async function benchLlamaCpp(file: string, opts: { threads: number; promptTokens: number; genTokens: number; nVocab: number }): Promise<PeerResult> {
  const l = await llama();
  const model = await l.loadModel({ modelPath: file });
  const context = await model.createContext({
    contextSize: opts.promptTokens + opts.genTokens + 8,
    batchSize: 512,
    threads: opts.threads,
    flashAttention: false,
  });
  try {
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
    return {
      prompt_tokens_per_s: (opts.promptTokens / (t1 - t0)) * 1000,
      gen_tokens_per_s: (n / (t2 - t1)) * 1000,
    };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}
