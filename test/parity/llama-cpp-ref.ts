// node-llama-cpp (llama.cpp's prebuilt CPU backend) as the reference engine for parity tests.
// It is ESM-only, so it is loaded with a dynamic import. The context is created with flash
// attention OFF: Fulcrum's attention matches llama.cpp's non-flash CPU path (f16 KV cache, q and
// softmax probabilities rounded to f16 before their mul_mats, f32 sums). Same thread count as
// the Fulcrum side.

export interface ReferenceModel {
  tokenize(text: string): number[];
  bos: number | undefined;
  /** Raw logits of the next token after `tokens` (evaluated from an empty KV cache). */
  lastLogits(tokens: number[]): Promise<Float32Array>;
  /** Greedy continuation: `n` token ids after `tokens` (not stopping at EOS). */
  greedy(tokens: number[], n: number): Promise<number[]>;
  dispose(): Promise<void>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

// tsx compiles this file to CommonJS, where `import()` would become require(); Function keeps
// it a real dynamic import.
const dynamicImport = new Function('m', 'return import(m)') as (m: string) => Promise<Any>;

let llamaPromise: Promise<Any> | undefined;

async function llama(): Promise<Any> {
  llamaPromise ??= (async () => {
    const nlc = await dynamicImport('node-llama-cpp');
    return nlc.getLlama({ gpu: false, build: 'never', logLevel: nlc.LlamaLogLevel.error });
  })();
  return llamaPromise;
}

export async function loadReference(modelPath: string, opts: { threads: number; contextSize: number }): Promise<ReferenceModel> {
  const l = await llama();
  const model = await l.loadModel({ modelPath });
  const context = await model.createContext({
    contextSize: opts.contextSize,
    batchSize: Math.min(512, opts.contextSize),
    threads: opts.threads,
    flashAttention: false,
  });
  const sequence = context.getSequence();
  const vocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length as number | undefined;
  return {
    bos: model.tokens.bos ?? undefined,
    tokenize: (text: string) => Array.from(model.tokenize(text, false) as number[]),
    async lastLogits(tokens: number[]): Promise<Float32Array> {
      await sequence.clearHistory();
      const input: Any[] = tokens.slice(0, -1);
      input.push([tokens[tokens.length - 1], { generateNext: { token: true, logits: true } }]);
      const res: Any[] = await sequence.controlledEvaluate(input, { temperature: 0 });
      const last = res[res.length - 1];
      const map: Map<number, number> = last.next.logits;
      const n = vocab ?? Math.max(...map.keys()) + 1;
      const out = new Float32Array(n);
      for (const [id, v] of map) out[id] = v;
      return out;
    },
    async greedy(tokens: number[], n: number): Promise<number[]> {
      await sequence.clearHistory();
      const out: number[] = [];
      for await (const t of sequence.evaluate(tokens, { temperature: 0 })) {
        out.push(t as number);
        if (out.length >= n) break;
      }
      return out;
    },
    async dispose() {
      await context.dispose();
      await model.dispose();
    },
  };
}
