// The profiler against the real native microbenchmarks, at smoke-test sizes: a bandwidth run
// gives positive finite numbers, bad options are rejected with the option's name, a whole
// (shrunken) profile validates, progress is monotone, and cancellation stops it.
import { vulkanProbe } from '../../engine/hardware/vulkan-profile';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { benchAddon, type BenchAddon } from '../../engine/hardware/bench-native';
import { runProfile } from '../../engine/profile/profiler';
import type { ProfileConfig } from '../../engine/hardware/profile-config';
import { summarize } from '../../engine/hardware/stats';
import { validateProfile } from '../../engine/hardware/validate';
import { summarizeProfile } from '../../engine/cli/profile';

let bench: BenchAddon | undefined;
let why = '';
try {
  bench = benchAddon();
} catch (e) {
  why = `native addon with the bench part not available: ${(e as Error).message}`;
}
const skip = bench ? false : why;
if (skip) console.log(`# skipping native profiler tests: ${why}`);

const MiB = 2 ** 20;

/** A grid small enough for a unit test (well under a second of measuring). */
function tiny(c: ProfileConfig): ProfileConfig {
  return {
    ...c,
    ringBytes: 8 * MiB,
    memory: { ...c.memory, bytes: 8 * MiB, threads: [1], warmups: 1, runs: 3 },
    gemv: { ...c.gemv, rows: 256, cols: 512, threads: [1], formats: ['F32', 'Q8_0'], warmups: 1, runs: 3 },
    gemm: { ...c.gemm, cols: 512, tokens: [8], flopsPerRun: 1e6, threads: [1], formats: ['F16'], warmups: 0, runs: 2 },
    attention: { ...c.attention, kvLengths: [64], threads: [1], warmups: 1, runs: 3 },
    contention: { ...c.contention, format: 'F32', threads: 1, disturbBytes: 2 * MiB, warmups: 1, runs: 3 },
    calibration: undefined,
  };
}

test('memory read and copy benchmarks return positive, finite bandwidths', { skip }, async () => {
  const bytes = 8 * MiB;
  for (const kind of ['memoryRead', 'memoryCopy'] as const) {
    const res = await bench![kind]({ bytes, threads: [1, 2], warmups: 1, runs: 3 });
    assert.deepEqual(res.map((r) => r.threads), [1, 2]);
    for (const r of res) {
      assert.equal(r.ns.length, 3);
      const gbps = bytes / summarize(r.ns).medianNs;
      assert.ok(Number.isFinite(gbps) && gbps > 0, `${kind} ${r.threads}t: ${gbps}`);
    }
  }
});

test('the read probe reads a slice as several streams side by side, every layout at a finite bandwidth', { skip }, async () => {
  // 8 MiB + 4 KiB: the slices are not whole multiples of the streams' lines, so the tail is read too.
  const bytes = 8 * MiB + 4096;
  for (const streams of [1, 3, 4, 8]) {
    const [r] = await bench!.memoryRead({ bytes, threads: [2], warmups: 0, runs: 2, streams, prefetch: streams > 1 });
    const gbps = bytes / summarize(r!.ns).medianNs;
    assert.ok(Number.isFinite(gbps) && gbps > 0, `${streams} streams: ${gbps}`);
  }
});

test('bench options are validated with the option named', { skip }, async () => {
  assert.throws(() => bench!.memoryRead({ bytes: 1000, threads: [1] }), /bytes must be an integer in/);
  assert.throws(() => bench!.memoryRead({ bytes: 8 * MiB, threads: [] }), /threads must hold 1 to 64/);
  assert.throws(() => bench!.memoryRead({ bytes: 8 * MiB, threads: [0] }), /threads\[0\]/);
  assert.throws(() => bench!.memoryRead({ bytes: 8 * MiB, threads: [1], streams: 17 }), /streams must be an integer in/);
  assert.throws(() => bench!.matmul({ rows: 4, cols: 32, tokens: 1, threads: [1] } as never), /type is required/);
  assert.throws(() => bench!.matmul({ type: 0, rows: 4, cols: 32, tokens: 1, threads: [1], disturb: 'dma' as never }), /disturb must be/);
  await assert.rejects(bench!.matmul({ type: 8, rows: 4, cols: 100, tokens: 1, threads: [1] }), /not a multiple of Q8_0's block size 32/);
  assert.throws(() => bench!.matmul({ type: 0, rows: 1 << 20, cols: 1024, tokens: 1 << 14, threads: [1] }), /tokens × max\(rows, cols\) is too large/);
  assert.throws(() => bench!.attention({ kvLen: 0, heads: 4, kvHeads: 2, headDim: 8, threads: [1] }), /kvLen/);
  assert.throws(() => bench!.attention({ kvLen: 3, heads: 4, kvHeads: 2, headDim: 8, tokens: 5, threads: [1] }), /tokens must be at most kvLen/);
});

test('the attention bench reads a cache that ends inside a page without leaving its buffer', { skip }, async () => {
  // The kernel addresses the last page as a whole page (KV head g at g · 64 rows), so a cache of
  // 1 or 65 positions must still hold whole pages: sized by positions, the upper heads of the last
  // page were read past the buffer's end (a segfault, most runs, at 16 KV heads of 128).
  // Several query tokens (a speculative step) take the page-major path with more score rows.
  for (const [kvLen, kvHeads, headDim, tokens] of [[1, 16, 128, 1], [65, 16, 128, 1], [200, 8, 64, 1], [1, 2, 64, 1], [65, 16, 128, 5], [200, 2, 64, 8]] as const) {
    for (const threads of [1, 2]) {
      const r = await bench!.attention({ kvLen, heads: kvHeads * 2, kvHeads, headDim, tokens, threads: [threads], warmups: 1, runs: 3 });
      assert.equal(r.bytesPerRun, 2 * kvLen * kvHeads * headDim * 2, `${kvLen} positions × ${kvHeads} KV heads × ${headDim}: K and V of those positions`);
      assert.ok(r.byThreads[0]!.ns.every((ns) => Number.isFinite(ns) && ns > 0));
    }
  }
});

test('an interleaved contention run returns both sides and the transfer it ran', { skip }, async () => {
  const r = await bench!.matmul({
    type: 0, rows: 256, cols: 512, tokens: 1, threads: [1], warmups: 1, runs: 4, disturb: 'host-memcpy', disturbBytes: 2 * MiB, interleave: true,
  });
  assert.equal(r.byThreads[0]?.ns.length, 4);
  assert.equal(r.contendedByThreads?.[0]?.ns.length, 4);
  assert.equal(r.byThreads[0]?.cpuNs?.length, 4);
  assert.equal(r.transfer?.kind, 'host-memcpy');
  assert.ok(r.transfer && r.transfer.bytes > 0 && r.transfer.ns > 0);
});

test('a smoke-size profile validates, has the required measured fields, and reports progress 0 → 1', { skip }, async () => {
  const progress: number[] = [];
  const p = await runProfile({ writeCache: false, tune: tiny, onProgress: (f) => progress.push(f) });
  const v = validateProfile(JSON.parse(JSON.stringify(p)), 'smoke profile');
  assert.equal(v.source.kind, 'measured');
  assert.match(v.source.fingerprint ?? '', /^[0-9a-f]{16}$/);
  assert.ok(v.cpu.memory.readGBps > 0 && Number.isFinite(v.cpu.memory.readGBps));
  assert.ok(v.cpu.memory.copyGBps > 0 && Number.isFinite(v.cpu.memory.copyGBps));
  const gemv = v.cpu.kernels.filter((k) => k.kernel === 'gemv');
  assert.deepEqual(gemv.map((k) => k.format).sort(), ['F32', 'Q8_0']);
  for (const k of gemv) assert.ok(k.gbps! > 0 && k.spread && k.spread.min <= k.gbps! && k.gbps! <= k.spread.max && k.tokens === 1);
  const gemm = v.cpu.kernels.filter((k) => k.kernel === 'gemm');
  assert.equal(gemm.length, 1);
  assert.ok(gemm[0]!.gflops! > 0 && gemm[0]!.tokens === 8);
  assert.equal(v.cpu.peakGflops, gemm[0]!.gflops);
  assert.equal(v.cpu.attention.length, 1);
  assert.ok(v.cpu.attention[0]!.gbps > 0);
  assert.ok(v.cpu.contentionFactor >= 1 && v.cpu.contention && v.cpu.contention.transferGBps > 0);
  {
    // The GPU is the device that executes: the Vulkan device measured through Fulcrum's own kernels, or none; never CUDA.
    assert.ok(!v.notes?.some((n) => /CUDA/.test(n)), 'no CUDA in a profile');
    const probe = vulkanProbe();
    if (probe.available) {
      // The GPU section names the Vulkan device the executor runs on, and says when it is a software one.
      assert.equal(v.gpu?.name, `${probe.name} (Vulkan)`);
      assert.deepEqual(v.gpu?.measuredOn, { api: 'vulkan', device: probe.name, type: probe.type, software: probe.type === 'cpu' });
      // The KV formats its attention shader reads, so plans for this machine keep attention on the CPU for others.
      assert.deepEqual(v.gpu?.kvFormats, ['F16']);
      const summary = summarizeProfile(v);
      assert.ok(summary.includes(`GPU: Vulkan device ${probe.name} (${probe.type}${probe.type === 'cpu' ? ': a software device, running on this CPU' : ''})`), summary);
      assert.match(summary, /measured through Fulcrum's kernels: matmul up to [0-9.]+ GFLOP\/s, GEMV up to [0-9.]+ GB\/s of weights, device memory copy [0-9.]+ GB\/s/);
      assert.match(summary, /host↔device copies: host→device [0-9.]+ GB\/s, device→host [0-9.]+ GB\/s/);
      assert.ok(v.gpu!.kernels!.length >= 4 && v.gpu!.kernels!.every((k) => k.gemvGBps > 0 && k.gemmTflops > 0), 'per-format kernel rates');
      assert.ok(v.link!.h2dPinnedGBps > 0 && v.link!.d2hPinnedGBps > 0 && v.gpu!.launchOverheadUs > 0);
    } else {
      assert.equal(v.gpu, undefined);
      assert.ok(v.notes?.some((n) => n.startsWith('no Vulkan device: ')));
    }
  }
  assert.equal(progress[0], 0);
  assert.equal(progress[progress.length - 1], 1);
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i]! >= progress[i - 1]!);
});

test('a second profile while one runs is refused', { skip }, async () => {
  const first = runProfile({ writeCache: false, tune: tiny });
  await assert.rejects(runProfile({ writeCache: false, tune: tiny }), /already being measured/);
  await first;
});

test('aborting stops the profile with an AbortError and writes no cache', { skip }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fulcrum-abort-'));
  const saved = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = dir;
  try {
    const ac = new AbortController();
    const run = runProfile({ tune: tiny, signal: ac.signal, onProgress: (f) => { if (f > 0) ac.abort(); } });
    await assert.rejects(run, { name: 'AbortError' });
    assert.throws(() => readdirSync(path.join(dir, 'fulcrum', 'profiles')), /ENOENT/);
  } finally {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = saved;
    rmSync(dir, { recursive: true, force: true });
  }
});
