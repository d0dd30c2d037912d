// `npm run bench:cpu`: CPU prefill and decode throughput of Fulcrum against llama.cpp
// (node-llama-cpp, same file, same thread count, flash attention off) on synthetic models of
// real shapes, plus decode as a fraction of the memory-bandwidth limit (measured read bandwidth
// ÷ weight bytes streamed per token). Prints a table and writes JSON under bench-results/.
//
// Options: --quick (64-token prompt, 16 decoded), --prompt N, --gen N, --threads 1,2,
// --shapes 0.5B,1.3B, --types Q8_0,Q4_0,Q4_K, --no-peer.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { parseArgs } from '../../engine/cli/command';
import { GgmlType, ggmlTypeByName, ggmlTypeName } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf';
import { packageRoot } from '../../engine/native/addon';
import { nativeKernels } from '../../engine/native/model';
import { benchModel } from '../../engine/runtime/bench';
import { BENCH_SHAPES, BENCH_TYPES, benchModelFile, unsupportedReason } from './bench-models';
import { benchLlamaCpp } from './llama-cpp-bench';

interface Row {
  shape: string;
  type: string;
  threads: number;
  skipped?: string;
  weight_bytes_per_token?: number;
  read_bandwidth_bytes_per_s?: number;
  fulcrum?: { prompt_tokens_per_s: number; gen_tokens_per_s: number; peak_rss_bytes: number };
  llama_cpp?: { prompt_tokens_per_s: number; gen_tokens_per_s: number };
  prefill_ratio?: number;
  decode_ratio?: number;
  fulcrum_decode_of_limit?: number;
  llama_cpp_decode_of_limit?: number;
}

/** Bytes a decode step streams: every tensor once, except the embedding (one row is read). */
function weightBytesPerToken(file: string): number {
  const g = readGguf(file);
  const tied = !g.tensors.some((t) => t.name === 'output.weight');
  return g.tensors.reduce((s, t) => s + (t.name === 'token_embd.weight' && !tied ? 0 : t.byteSize), 0);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2), ['prompt', 'gen', 'threads', 'shapes', 'types'], ['quick', 'no-peer']);
  const quick = args.options.has('quick');
  const promptTokens = Number(args.options.get('prompt') ?? (quick ? 64 : 512));
  const genTokens = Number(args.options.get('gen') ?? (quick ? 16 : 128));
  const threadList = (args.options.get('threads') ?? '1,2').split(',').map(Number);
  const shapeNames = args.options.get('shapes')?.split(',');
  const shapes = BENCH_SHAPES.filter((s) => !shapeNames || shapeNames.includes(s.label));
  const types = args.options.get('types')?.split(',').map((n) => {
    const info = ggmlTypeByName(n);
    if (!info) throw new Error(`unknown type ${n}`);
    return info.type as GgmlType;
  }) ?? BENCH_TYPES;
  const peer = !args.options.has('no-peer');

  const kernels = nativeKernels();
  const bandwidth = new Map<number, number>();
  for (const t of threadList) bandwidth.set(t, kernels.readBandwidth(512 << 20, t, 9));

  const rows: Row[] = [];
  for (const shape of shapes) {
    for (const type of types) {
      const reason = unsupportedReason(shape, type);
      for (const threads of threadList) {
        const row: Row = { shape: shape.label, type: ggmlTypeName(type), threads };
        rows.push(row);
        if (reason) {
          row.skipped = reason;
          continue;
        }
        process.stderr.write(`${shape.label} ${ggmlTypeName(type)} ${threads} thread(s)…\n`);
        const file = benchModelFile(shape, type);
        const bytes = weightBytesPerToken(file);
        const bw = bandwidth.get(threads)!;
        row.weight_bytes_per_token = bytes;
        row.read_bandwidth_bytes_per_s = bw;
        const f = await benchModel(file, { threads, promptTokens, genTokens });
        row.fulcrum = { prompt_tokens_per_s: f.prompt_tokens_per_s, gen_tokens_per_s: f.gen_tokens_per_s, peak_rss_bytes: f.peak_rss_bytes };
        row.fulcrum_decode_of_limit = f.gen_tokens_per_s / (bw / bytes);
        if (peer) {
          const l = await benchLlamaCpp(file, { threads, promptTokens, genTokens, nVocab: shape.spec.nVocab! });
          row.llama_cpp = l;
          row.prefill_ratio = f.prompt_tokens_per_s / l.prompt_tokens_per_s;
          row.decode_ratio = f.gen_tokens_per_s / l.gen_tokens_per_s;
          row.llama_cpp_decode_of_limit = l.gen_tokens_per_s / (bw / bytes);
        }
      }
    }
  }

  const fmt = (v: number | undefined, d = 1) => (v === undefined ? '—' : v.toFixed(d));
  const pct = (v: number | undefined) => (v === undefined ? '—' : `${(v * 100).toFixed(0)}%`);
  const lines = [
    `prompt ${promptTokens} tokens, decode ${genTokens} tokens; read bandwidth ${threadList.map((t) => `${t}T ${(bandwidth.get(t)! / 1e9).toFixed(1)} GB/s`).join(', ')}`,
    'shape  type  thr | prefill tok/s  fulcrum  llama.cpp  ratio | decode tok/s  fulcrum  llama.cpp  ratio | decode/limit  fulcrum  llama.cpp',
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
        `${pct(r.fulcrum_decode_of_limit).padStart(22)}${pct(r.llama_cpp_decode_of_limit).padStart(11)}`,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  const dir = path.join(packageRoot(), 'bench-results');
  mkdirSync(dir, { recursive: true });
  const out = path.join(dir, `bench-cpu-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(out, `${JSON.stringify({ isa: kernels.isaLevel(), promptTokens, genTokens, rows }, null, 2)}\n`);
  process.stdout.write(`wrote ${out}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`bench-cpu: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
});
