// The Vulkan device's kernels against the CPU, on whatever Vulkan device the machine has (in CI:
// Mesa's lavapipe), with the Khronos validation layer on: any validation message fails. Random
// and edge-shaped inputs (one row, odd sizes, tails) and an F32 tensor above 128 MiB, bound
// through windows within maxStorageBufferRange. Tolerance: |y - y64| <= 1e-5 · Σ|w·x| + 1e-6,
// where y64 is the float64 product of the same (dequantized) weights and inputs: the GPU sums in
// f32 in another order. RMSNorm, add and SwiGLU: 1e-5 relative; RoPE: see its bound below.
// Skips, saying why, where there is no Vulkan loader or device.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { repoRoot } from '../helpers/shared';

const CHILD = `
const a = require(${JSON.stringify(path.join(repoRoot, 'native', 'build', 'Release', 'fulcrum.node'))});
const p = a.vulkan.probe();
if (!p.available) { console.log(JSON.stringify({ skip: p.reason })); process.exit(0); }
let seed = 7; const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff - 0.5; };
const f16 = (v) => { const f = new Float32Array([v]); const i = new Uint32Array(f.buffer)[0];
  const s = (i >>> 16) & 0x8000; let e = ((i >>> 23) & 0xff) - 112; let m = i & 0x7fffff;
  if (e <= 0) return s; if (e >= 31) return s | 0x7c00; return s | (e << 10) | ((m + 0x1000) >>> 13); };
const h2f = (h) => { const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023; return e === 0 ? s * m * 2 ** -24 : s * (1 + m / 1024) * 2 ** (e - 15); };
const out = [];
function check(type, rows, cols) {
  const x = new Float32Array(cols).map(rnd);
  let bytes, deq = new Float64Array(rows * cols);
  if (type === 0) {
    const w = new Float32Array(rows * cols).map(rnd); bytes = new Uint8Array(w.buffer); deq.set(w);
  } else {
    const nb = cols / 32; bytes = new Uint8Array(rows * nb * 34);
    for (let r = 0; r < rows; r++) for (let b = 0; b < nb; b++) {
      const o = (r * nb + b) * 34; const d = f16(Math.abs(rnd()) / 64 + 1e-3); bytes[o] = d & 255; bytes[o + 1] = d >> 8;
      for (let i = 0; i < 32; i++) { const q = Math.round(rnd() * 254); bytes[o + 2 + i] = q & 255; deq[r * cols + b * 32 + i] = h2f(d) * q; }
    }
  }
  const r = a.vulkan.matvec(type, bytes, rows, cols, x);
  let worst = 0;
  for (let i = 0; i < rows; i++) {
    let s = 0, mag = 0; for (let c = 0; c < cols; c++) { const t = deq[i * cols + c] * x[c]; s += t; mag += Math.abs(t); }
    worst = Math.max(worst, Math.abs(r.y[i] - s) / (1e-5 * mag + 1e-6));
  }
  out.push({ type, rows, cols, worst, windows: r.windows, validation: r.validationMessages });
}
for (const [rows, cols] of [[1, 1], [1, 96], [37, 3], [37, 96], [1000, 4097], [3, 8192]]) check(0, rows, cols);
for (const [rows, cols] of [[1, 32], [37, 96], [513, 4096], [7, 32 * 300]]) check(8, rows, cols);
check(0, 8200, 4100);  // 134.5 MB of F32: above lavapipe's 128 MiB maxStorageBufferRange
// F16, Q4_0, Q4_K and Q6_K weights made by the CPU's quantizer, against the float64 product of the
// CPU's own dequantization of the same bytes (so the GPU reads the blocks as the CPU does), one
// token and a 13-token product (two token tiles, the second partial).
const ids = Object.fromEntries(a.quantFormats().map((f) => [f.name, f.typeId]));
function checkQuant(name, rows, cols, tokens) {
  const wf = new Float32Array(rows * cols).map(rnd);
  let id, bytes, deq;
  if (name === 'F16') {  // GGML type 1; not a block format, so converted here
    id = 1;
    const h = Uint16Array.from(wf, f16);
    bytes = new Uint8Array(h.buffer);
    deq = Float64Array.from(h, h2f);
  } else {
    id = ids[name];
    bytes = a.quantize(id, wf);
    deq = a.dequantize(id, bytes, rows * cols);
  }
  const x = new Float32Array(cols * tokens).map(rnd);
  const r = a.vulkan.matvec(id, bytes, rows, cols, x, tokens);
  let worst = 0;
  for (let t = 0; t < tokens; t++) for (let i = 0; i < rows; i++) {
    let s = 0, mag = 0; for (let c = 0; c < cols; c++) { const v = deq[i * cols + c] * x[t * cols + c]; s += v; mag += Math.abs(v); }
    worst = Math.max(worst, Math.abs(r.y[t * rows + i] - s) / (1e-5 * mag + 1e-6));
  }
  out.push({ type: name, rows, cols, tokens, worst, windows: r.windows, validation: r.validationMessages });
}
for (const name of ['F16', 'Q8_0', 'Q4_0', 'Q4_K', 'Q6_K']) {
  const blk = name.endsWith('_K') ? 256 : 32;
  for (const [rows, cols, tokens] of [[1, blk, 1], [37, 3 * blk, 1], [129, 8 * blk, 1], [33, 2 * blk, 13]]) checkQuant(name, rows, cols, tokens);
}
checkQuant('F16', 5, 33, 3);  // an odd width: F16 rows are not word-aligned
// Several tokens at once (prefill): each token row against every weight row.
function checkTokens(type, rows, cols, tokens) {
  const x = new Float32Array(cols * tokens).map(rnd);
  const w = new Float32Array(rows * cols).map(rnd);
  const r = a.vulkan.matvec(0, new Uint8Array(w.buffer), rows, cols, x, tokens);
  let worst = 0;
  for (let t = 0; t < tokens; t++) for (let i = 0; i < rows; i++) {
    let s = 0, mag = 0; for (let c = 0; c < cols; c++) { const v = w[i * cols + c] * x[t * cols + c]; s += v; mag += Math.abs(v); }
    worst = Math.max(worst, Math.abs(r.y[t * rows + i] - s) / (1e-5 * mag + 1e-6));
  }
  out.push({ type: 'matmul', rows, cols, worst, windows: r.windows, validation: r.validationMessages });
}
checkTokens(0, 33, 70, 5);
checkTokens(0, 1, 1, 3);
// Element-wise and per-row kernels against the CPU kernels (rmsnorm, rope) and float64 (add, swiglu).
const rel = (got, want) => { let w = 0; for (let i = 0; i < want.length; i++) w = Math.max(w, Math.abs(got[i] - want[i]) / (1e-5 * (Math.abs(want[i]) + 1e-3))); return w; };
for (const [rows, width] of [[1, 1], [3, 65], [7, 4096]]) {
  const x = new Float32Array(rows * width).map(rnd), w = new Float32Array(width).map(rnd);
  const got = a.vulkan.rmsnorm(x, w, rows, width, 1e-5);
  const want = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) want.set(a.kernels.rmsnorm(x.subarray(r * width, (r + 1) * width), w, 1e-5), r * width);
  out.push({ type: 'rmsnorm', rows, cols: width, worst: rel(got, want) });
}
for (const [rows, heads, hd, nRot, pos0, neox] of [[1, 1, 2, 2, 0, false], [5, 4, 64, 64, 17, false], [5, 4, 64, 64, 3000, true], [2, 3, 128, 64, 9, true]]) {
  const x = new Float32Array(rows * heads * hd).map(rnd);
  const got = a.vulkan.rope(x, rows, heads, hd, nRot, pos0, 10000, 1, neox);
  const want = new Float32Array(rows * heads * hd);
  for (let r = 0; r < rows; r++) want.set(a.kernels.rope(x.subarray(r * heads * hd, (r + 1) * heads * hd), heads, hd, pos0 + r, nRot, 10000, 1, neox), r * heads * hd);
  // θ is formed as on the CPU; sin/cos are the device's, a few ulps from the C library's, and their
  // error grows with the angle: bound 2e-6 + 1e-7 · (largest position), absolute (inputs in ±0.5).
  const bound = 2e-6 + 1e-7 * (pos0 + rows);
  let w = 0; for (let i = 0; i < want.length; i++) w = Math.max(w, Math.abs(got[i] - want[i]) / bound);
  out.push({ type: neox ? 'rope-neox' : 'rope', rows, cols: hd, worst: w });
}
for (const [n, bw] of [[1, 1], [96, 32], [1000, 1000]]) {
  const y = new Float32Array(n).map(rnd), b = new Float32Array(bw).map(rnd);
  const got = a.vulkan.add(y, b);
  out.push({ type: 'add', rows: n, cols: bw, worst: rel(got, Float32Array.from(y, (v, i) => v + b[i % bw])) });
}
for (const n of [1, 7, 5000]) {
  const g = new Float32Array(n).map((_, i) => rnd() * 20), u = new Float32Array(n).map(rnd);
  const got = a.vulkan.swiglu(g, u);
  out.push({ type: 'swiglu', rows: n, cols: 1, worst: rel(got, Float32Array.from(g, (v, i) => (v / (1 + Math.exp(-v))) * u[i])) });
}
// Attention over paged f16 KV (pages stored out of order), decode and prefill, GQA, against the
// CPU kernel: the CPU also rounds the probabilities to f16 before they weight V, the GPU keeps
// them in f32 (online softmax): bound 1e-4 absolute for inputs in ±0.5.
for (const [nh, nkv, hd, pt, npos, rows] of [[2, 1, 2, 4, 1, 1], [4, 2, 64, 64, 70, 1], [4, 4, 32, 8, 33, 5], [8, 2, 128, 64, 300, 16], [14, 2, 64, 64, 129, 3]]) {
  const q = new Float32Array(rows * nh * hd).map(rnd), k = new Float32Array(npos * nkv * hd).map(rnd), v = new Float32Array(npos * nkv * hd).map(rnd);
  const got = a.vulkan.attention(q, k, v, nh, nkv, hd, pt), want = a.kernels.attention(q, k, v, nh, nkv, hd, pt, 1);
  let w = 0; for (let i = 0; i < want.length; i++) w = Math.max(w, Math.abs(got[i] - want[i]) / 1e-4);
  out.push({ type: 'attention', rows, cols: npos, worst: w });
}
console.log(JSON.stringify({ probe: a.vulkan.probe(), out }));
`;

test('Vulkan kernels (matvec F32/F16/Q8_0/Q4_0/Q4_K/Q6_K, matmul, RMSNorm, RoPE both styles, add, SwiGLU, paged attention) equal the CPU within the bound, windows past 128 MiB, no validation message', () => {
  const r = spawnSync(process.execPath, ['-e', CHILD], {
    encoding: 'utf8', timeout: 300_000,
    env: { ...process.env, VK_INSTANCE_LAYERS: 'VK_LAYER_KHRONOS_validation', LP_NUM_THREADS: '1', XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? '/tmp' },
  });
  assert.equal(r.status, 0, r.stderr);
  const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as { skip?: string; probe: { name: string; validationMessages: number; lastValidationMessage: string; maxStorageBufferRange: number }; out: { type: number | string; rows: number; cols: number; worst: number; windows: number; validation: number }[] };
  if (res.skip) {
    console.log(`  skipped: ${res.skip}`);
    return;
  }
  console.log(`  device: ${res.probe.name}`);
  for (const o of res.out) {
    assert.ok(o.worst <= 1, `type ${o.type} ${o.rows}×${o.cols}: error ${o.worst.toFixed(2)} × the bound`);
  }
  const big = res.out.find((o) => o.type === 0 && o.rows === 8200)!;
  assert.ok(big.windows >= 2 || res.probe.maxStorageBufferRange > 8200 * 4100 * 4, `the 134.5 MB tensor was bound through ${big.windows} window(s)`);
  assert.equal(res.probe.validationMessages, 0, `validation: ${res.probe.lastValidationMessage}`);
  assert.doesNotMatch(r.stdout + r.stderr, /Validation Error|VUID-/, 'no validation output');
});
