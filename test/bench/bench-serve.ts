// Serving many clients: throughput and per-request latency at 1, 4 and 16 concurrent clients,
// Fulcrum's scheduler (continuous batching over multi-sequence steps) against node-llama-cpp
// serving the same file with the same number of parallel sequences (one context, N sequences,
// its automatic batching), same threads. Every client sends `--requests` requests one after
// another, each a distinct prompt of `--prompt` tokens and `--gen` greedy tokens. A benchmark, not
// a test: it prints.
//
// Run: npm run bench:serve [-- --model FILE] [--clients 1,4,16] [--prompt 128] [--gen 32] [--requests 2] [--threads 2]
//
// With --online: measured throughput of NEO's gpu-only baseline, NEO and APEX deciding live on
// loopback (and Vulkan when present) next to the online simulator's prediction for the same
// arrivals (test/bench/serve-online.ts):
//   npm run bench:serve -- --online [--model FILE] [--requests 16] [--prompt 48] [--gen 32] [--rate inf|R]
//                          [--parallel 8] [--vram BYTES | --kv-factor 0.95] [--hardware PRESET|this] [--repeat 3] [--no-vulkan]
//                          [--cpu-attn-scale 40 [--cpu-request-ratio 2]]   (a row of APEX on a T4-like CPU:GPU gap)
import os from 'node:os';
import { GgmlType } from '../../engine/model/ggml-types';
import { nativeKernels } from '../../engine/native/model';
import { Engine } from '../../engine/runtime/engine';
import { BENCH_SHAPES, benchModelFile } from './bench-models';
import { onlineBench } from './serve-online';

type Any = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const dynamicImport = new Function('m', 'return import(m)') as (m: string) => Promise<Any>;

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const pct = (xs: number[], p: number): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN; };

interface Row { engine: string; clients: number; tokensPerS: number; p50: number; p95: number; ttft50: number }

function promptOf(client: number, req: number, n: number, vocab: number): number[] {
  return Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + client * 104729 + req * 1299709) % (vocab - 1)));
}

async function runFulcrum(file: string, clients: number, prompt: number, gen: number, requests: number, threads: number, vocab: number): Promise<Row> {
  const e = await Engine.load(file, { threads, contextLength: prompt + gen + 16, device: 'cpu', maxSequences: clients });
  try {
    const s = e.scheduler({ stepRows: 512 });
    // Warm-up: page the weights in.
    await s.submit({ prompt: promptOf(999, 0, 8, vocab), maxTokens: 2, temperature: 0 }).result;
    const lat: number[] = [], ttft: number[] = [];
    let tokens = 0;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: clients }, async (_, c) => {
      for (let r = 0; r < requests; r++) {
        const res = await s.submit({ prompt: promptOf(c, r, prompt, vocab), maxTokens: gen, temperature: 0 }).result;
        lat.push(res.totalMs);
        ttft.push(res.firstTokenMs);
        tokens += res.generatedTokens;
      }
    }));
    const wall = performance.now() - t0;
    return { engine: 'fulcrum', clients, tokensPerS: (tokens / wall) * 1000, p50: pct(lat, 0.5), p95: pct(lat, 0.95), ttft50: pct(ttft, 0.5) };
  } finally {
    e.dispose();
  }
}

async function runLlamaCpp(file: string, clients: number, prompt: number, gen: number, requests: number, threads: number, vocab: number): Promise<Row> {
  const nlc = await dynamicImport('node-llama-cpp');
  const llama = await nlc.getLlama({ gpu: false, build: 'never', logLevel: nlc.LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: file });
  const context = await model.createContext({ contextSize: clients * (prompt + gen + 16), sequences: clients, batchSize: 512, threads, flashAttention: false });
  try {
    const lat: number[] = [], ttft: number[] = [];
    let tokens = 0;
    const warm = context.getSequence();
    await warm.evaluateWithoutGeneratingNewTokens(promptOf(999, 0, 8, vocab));
    warm.dispose();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: clients }, async (_, c) => {
      const seq = context.getSequence();
      for (let r = 0; r < requests; r++) {
        await seq.clearHistory();
        const start = performance.now();
        let first = 0, n = 0;
        for await (const _t of seq.evaluate(promptOf(c, r, prompt, vocab), { temperature: 0 })) {
          if (!first) first = performance.now();
          if (++n >= gen) break;
        }
        lat.push(performance.now() - start);
        ttft.push(first - start);
        tokens += n;
      }
      seq.dispose();
    }));
    const wall = performance.now() - t0;
    return { engine: 'llama.cpp', clients, tokensPerS: (tokens / wall) * 1000, p50: pct(lat, 0.5), p95: pct(lat, 0.95), ttft50: pct(ttft, 0.5) };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

async function main(): Promise<void> {
  const file = arg('model', '') || benchModelFile(BENCH_SHAPES[0]!, GgmlType.Q8_0);
  const clientsList = arg('clients', '1,4,16').split(',').map(Number);
  const prompt = Number(arg('prompt', '128')), gen = Number(arg('gen', '32')), requests = Number(arg('requests', '2'));
  const threads = Number(arg('threads', String(nativeKernels().physicalCores())));
  const vocab = Number(arg('vocab', '32000'));
  process.stdout.write(`CPU: ${os.cpus()[0]?.model.trim()} (${nativeKernels().isaLevel()} kernels); threads ${threads}; model ${file}\n`);
  process.stdout.write(`each client: ${requests} requests one after another, prompt ${prompt} tokens, ${gen} greedy tokens\n\n`);
  process.stdout.write('clients | engine     | gen tok/s (all clients) | request p50 ms  p95 ms | first token p50 ms\n');
  for (const n of clientsList) {
    const rows = [await runFulcrum(file, n, prompt, gen, requests, threads, vocab)];
    if (!process.argv.includes('--no-peer')) rows.push(await runLlamaCpp(file, n, prompt, gen, requests, threads, vocab));
    for (const r of rows) {
      process.stdout.write(`${String(r.clients).padStart(7)} | ${r.engine.padEnd(10)} | ${r.tokensPerS.toFixed(1).padStart(23)} | ${r.p50.toFixed(0).padStart(14)} ${r.p95.toFixed(0).padStart(7)} | ${r.ttft50.toFixed(0).padStart(18)}\n`);
    }
    if (rows.length === 2) process.stdout.write(`        | ratio      | ${(rows[0]!.tokensPerS / rows[1]!.tokensPerS).toFixed(2).padStart(23)} |\n`);
  }
}

(process.argv.includes('--online') ? onlineBench() : main()).catch((e) => { process.stderr.write(`${(e as Error).stack}\n`); process.exitCode = 1; });
