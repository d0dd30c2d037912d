// Quick single-thread measurement of the block-format vec_dot kernels (not a test): GB/s of
// weights streamed by one matrix-vector product (activation quantize + rows x vec_dot) per
// format and ISA path, next to llama.cpp's own kernels on the same bytes (node-llama-cpp's ggml
// CPU backend, loaded by the addon with dlopen) and the single-thread read bandwidth (the one read
// benchmark, bench.memoryRead, with and without software prefetch).
//   node test/bench/bench-quant.mjs [rows=4096] [reps=15]
// rows=4096 gives 4096x4096 matrices (cache-resident on machines with a large L3); use
// rows=262144 for matrices far larger than any cache (about 0.6-1.1 GB each).
// Env: FULCRUM_NATIVE_BUILD (addon variant dir, default Release), PEER (ggml CPU library file),
// ONLY (comma list of formats), ISAS (comma list, default: every path this CPU runs).
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const addon = require(path.join(root, 'native', 'build', process.env.FULCRUM_NATIVE_BUILD ?? 'Release', 'fulcrum.node'));

const rows = Number(process.argv[2] ?? 4096), cols = 4096, reps = Number(process.argv[3] ?? 15);
const types = { Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q8_0: 8, Q4_K: 12, Q5_K: 13, Q6_K: 14 };
const only = process.env.ONLY ? process.env.ONLY.split(',') : Object.keys(types);
const isas = process.env.ISAS ? process.env.ISAS.split(',') : addon.quantIsas().filter((i) => i !== 'scalar');

const peerDir = path.join(root, 'node_modules', '@node-llama-cpp', 'linux-x64', 'bins', 'linux-x64');
const peerName = process.env.PEER ?? (isas.includes('avx512') ? 'libggml-cpu-sapphirerapids.so' : 'libggml-cpu-haswell.so');
let peer = false;
if (existsSync(path.join(peerDir, peerName))) {
  addon.quantPeerOpen(path.join(peerDir, peerName));
  peer = true;
} else {
  console.log(`(no llama.cpp peer: ${path.join(peerDir, peerName)} not found)`);
}

// bench.memoryRead needs whole 4 KiB pages and at least 1 MiB.
const bytes = Math.max(1 << 20, Math.floor((rows * cols * 1.0625) / 4096) * 4096);
const readGbPerSecond = async (prefetch) => {
  const [s] = await addon.bench.memoryRead({ bytes, threads: [1], warmups: 1, runs: reps, prefetch });
  const ns = [...s.ns].sort((a, b) => a - b)[s.ns.length >> 1];
  return bytes / ns;
};
const r = await readGbPerSecond(false), rp = await readGbPerSecond(true);
console.log(`${rows}x${cols}, single thread, median of ${reps}; read loop over ${(bytes / 1e6).toFixed(0)} MB: ` +
  `${r.toFixed(1)} GB/s (with software prefetch ${rp.toFixed(1)} GB/s)`);
for (const name of only) {
  const cells = [name.padEnd(5)];
  for (const isa of isas) cells.push(`${isa} ${addon.quantBenchMatVec(types[name], rows, cols, isa, reps).gbPerSecond.toFixed(1)} GB/s`);
  if (peer) cells.push(`llama.cpp ${addon.quantPeerMatVec(types[name], rows, cols, reps).gbPerSecond.toFixed(1)} GB/s`);
  console.log(cells.join('  |  '));
}
