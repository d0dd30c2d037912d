// Cost model: op work (FLOPs, bytes) per family, device times from a profile, costs-file kinds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { layerWork, headWork } from '../../engine/cost/ops';
import { cpuAttentionGBps, cpuKernelRate, cpuOpMs, gpuOpMs, transferMs } from '../../engine/cost/device';
import { ProfileCostModel } from '../../engine/cost/model';
import { kindOfOpName } from '../../engine/cost/costs-file';
import { hardwarePreset } from '../../engine/hardware/presets';
import { modelPreset } from '../../engine/model/model-presets';

test('llama op list, FLOPs and bytes for a decode step (Llama-3.1-8B, GQA)', () => {
  const m = modelPreset('llama-3.1-8b');
  const w = layerWork(m, { batch: 2, newTokens: 1, context: 99 });
  assert.deepEqual(w.map((o) => o.name), ['attn_norm', 'Q', 'K', 'V', 'RoPE', 'Scores', 'Softmax', 'WV', 'Output', 'ffn_norm', 'Gate', 'Up', 'Down']);
  const by = Object.fromEntries(w.map((o) => [o.name, o]));
  assert.equal(by.Q!.flops, 2 * 2 * 4096 * 4096);
  assert.equal(by.K!.weightBytes, 4096 * 1024 * 2);
  assert.equal(by.K!.kvWriteBytes, 2 * 1024 * 2); // two new tokens' K in F16
  // Scores read every stored key once per sequence: 2 sequences × 100 keys × 1024 × 2 bytes.
  assert.equal(by.Scores!.kvReadBytes, 2 * 100 * 1024 * 2);
  assert.equal(by.Scores!.flops, 2 * 2 * 4096 * 100);
  assert.equal(by.Gate!.flops, 2 * 2 * 4096 * 14336);
  assert.equal(by.Down!.weightBytes, 14336 * 4096 * 2);
});

test('OPT op list has LN and FC.0/FC.1 (ReLU, no gate, no RoPE)', () => {
  const w = layerWork(modelPreset('opt-30b'), { batch: 1, newTokens: 1, context: 10 });
  assert.deepEqual(w.map((o) => o.name), ['LN.0', 'Q', 'K', 'V', 'Scores', 'Softmax', 'WV', 'Output', 'LN.1', 'FC.0', 'FC.1']);
  assert.equal(w.find((o) => o.name === 'FC.0')!.weightBytes, 7168 * 28672 * 2);
});

test('quantised formats shrink weight bytes by their block sizes', () => {
  const f16 = layerWork(modelPreset('llama-2-7b'), { batch: 1, newTokens: 1, context: 0 });
  const q4 = layerWork(modelPreset('llama-2-7b:Q4_K'), { batch: 1, newTokens: 1, context: 0 });
  const q = (w: typeof f16) => w.find((o) => o.name === 'Q')!.weightBytes;
  assert.equal(q(q4) / q(f16), (144 / 256) / 2);
});

test('prefill attention is causal: mean keys per query = context + (n + 1) / 2', () => {
  const m = modelPreset('llama-2-7b');
  const w = layerWork(m, { batch: 1, newTokens: 100, context: 0 });
  assert.equal(w.find((o) => o.name === 'Scores')!.flops, 2 * 100 * 4096 * 50.5);
  assert.equal(headWork(m, 3).flops, 2 * 3 * 32000 * 4096 + 5 * 3 * 4096);
});

test('bad step shapes are rejected with the field name', () => {
  assert.throws(() => layerWork(modelPreset('llama-2-7b'), { batch: 0, newTokens: 1, context: 0 }), /batch must be/);
  assert.throws(() => layerWork(modelPreset('llama-2-7b'), { batch: 1, newTokens: 1, context: NaN }), /context must be/);
});

test('device times: memory-bound GEMV at the kernel rate, compute-bound GEMM at the GEMM rate', () => {
  const hw = hardwarePreset('paper000');
  const m = modelPreset('opt-30b');
  const decode = layerWork(m, { batch: 1, newTokens: 1, context: 0 }).find((o) => o.name === 'Q')!;
  const rate = cpuKernelRate(hw.cpu, 'gemv', 'F16');
  const expectMs = (decode.weightBytes / (rate * 1e9)) * 1e3;
  const got = cpuOpMs(hw.cpu, decode, 0);
  assert.ok(got >= expectMs && got < expectMs * 1.05, `${got} vs ${expectMs}`);
  const prefill = layerWork(m, { batch: 1, newTokens: 2048, context: 0 }).find((o) => o.name === 'Q')!;
  const g = gpuOpMs(hw.gpu!, prefill);
  assert.ok(Math.abs(g - (prefill.flops / (hw.gpu!.fp16Tflops * 1e12 * hw.gpu!.efficiency.gemm)) * 1e3 - hw.gpu!.launchOverheadUs / 1e3) < 1e-9);
  // Transfers: bytes / pinned bandwidth + latency.
  assert.ok(Math.abs(transferMs(hw, 24.4e9, 'h2d') - (1000 + hw.link!.latencyUs / 1e3)) < 1e-9);
  assert.equal(transferMs(hw, 0, 'h2d'), 0);
});

test('CPU attention rate interpolates linearly between measured KV lengths', () => {
  const hw = hardwarePreset('paper000');
  hw.cpu.attention = [{ kvLength: 1000, threads: 16, gbps: 10 }, { kvLength: 3000, threads: 16, gbps: 30 }, { kvLength: 3000, threads: 8, gbps: 20 }];
  assert.equal(cpuAttentionGBps(hw.cpu, 500), 10);
  assert.equal(cpuAttentionGBps(hw.cpu, 2000), 20);
  assert.equal(cpuAttentionGBps(hw.cpu, 9000), 30);
});

test('cost model: contended CPU times and h2d split into weights and KV', () => {
  const hw = hardwarePreset('paper000');
  const cm = new ProfileCostModel(modelPreset('opt-30b'), hw);
  const t = cm.layerTimes({ batch: 50, newTokens: 1, context: 520 }, 'decode');
  const q = t.ops.find((o) => o.name === 'Q')!;
  assert.ok(Math.abs(q.cpu! - q.cpuSolo! * hw.cpu.contentionFactor) < 1e-9);
  // Q's weight: 7168² × 2 bytes at 24.4 GB/s = 4.21 ms — paper 000 Fig. 6a prints 4.214 ms.
  assert.ok(Math.abs(q.h2d! - 4.214) < 0.01, `${q.h2d}`);
  const s = t.ops.find((o) => o.name === 'Scores')!;
  assert.equal(s.h2d, s.h2dKv);
  assert.equal(kindOfOpName('FC.0'), 'fc1');
  assert.equal(kindOfOpName('Scores#3/8'), 'custom');
});
