// Hardware and model presets: every preset builds, validates and cites a source; shapes match
// the numbers the papers quote.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GPU_PRESETS, HOST_PRESETS, MACHINE_PRESETS, composeProfile, hardwarePreset } from '../../engine/hardware/presets';
import { validateProfile } from '../../engine/hardware/validate';
import { MODEL_PRESET_DEFS, modelPreset } from '../../engine/model/model-presets';
import { kvBytesPerToken, layerWeightBytes } from '../../engine/model/shape';
import { presetList } from '../../engine/cli/presets';

test('every machine, GPU+host combination and host preset validates and has a citation', () => {
  for (const m of MACHINE_PRESETS) {
    const p = validateProfile(JSON.parse(JSON.stringify(hardwarePreset(m.key))), m.key);
    assert.ok(p.source.citation.length > 10, m.key);
    assert.equal(p.source.kind, 'preset');
  }
  for (const g of GPU_PRESETS) validateProfile(hardwarePreset(`${g.key}+ryzen9-7950x`));
  // A host alone is a CPU-only machine (machine names win where a host shares one, e.g. g5.4xlarge).
  for (const h of HOST_PRESETS) assert.equal(composeProfile(undefined, h.key).gpu, undefined);
  assert.equal(hardwarePreset('ryzen9-7950x').gpu, undefined);
  const names = GPU_PRESETS.map((g) => g.key);
  for (const need of ['t4', 'a10g', 'rtx-a4000', 'a100-40gb', 'h100-pcie', 'h100-sxm', 'rtx3060-12gb', 'rtx4060-laptop-8gb', 'rtx4090']) assert.ok(names.includes(need), need);
  assert.ok(hardwarePreset('spr-a100').cpu.isa.amx);
  assert.throws(() => hardwarePreset('nope'), /unknown hardware preset 'nope'/);
  assert.throws(() => hardwarePreset('t4+nohost'), /unknown host preset 'nohost'/);
});

test('profile validation names the bad field', () => {
  const p = JSON.parse(JSON.stringify(hardwarePreset('paper000')));
  p.gpu.efficiency.gemm = 2;
  assert.throws(() => validateProfile(p, 'x.json'), /x.json: gpu.efficiency.gemm must be a number in \[0.000001, 1\]/);
  assert.throws(() => validateProfile({ version: 99 }, 'x.json'), /version must be 1/);
});

test('model presets: KV bytes per token match the papers (NEO digest §4) and OPT-30B layer = 24·d² (LIA §3 Opt-1)', () => {
  assert.equal(kvBytesPerToken(modelPreset('llama-2-7b')), 512 * 1024);
  assert.equal(kvBytesPerToken(modelPreset('llama-3.1-8b')), 128 * 1024);
  assert.equal(kvBytesPerToken(modelPreset('llama-3.1-70b')), 320 * 1024);
  const opt30 = modelPreset('opt-30b');
  assert.equal(layerWeightBytes(opt30), 24 * 7168 * 7168 + 16 * 7168); // ≈ 1.2 GB per layer
  const keys = MODEL_PRESET_DEFS.map((d) => d.key);
  for (const k of ['opt-30b', 'opt-66b', 'opt-175b', 'llama-2-7b', 'llama-3.1-8b', 'llama-3.1-70b', 'codellama-34b', 'qwen2.5-coder-1.5b', 'qwen2.5-coder-7b', 'qwen2.5-coder-32b', 'deepseek-coder-1.3b', 'deepseek-coder-6.7b', 'deepseek-coder-33b']) assert.ok(keys.includes(k), k);
  assert.equal(modelPreset('qwen2.5-coder-7b:q4_k').weightFormats.attn_q, 'Q4_K');
  assert.throws(() => modelPreset('llama-9'), /unknown model preset/);
  assert.throws(() => modelPreset('llama-2-7b:Q9_X'), /unsupported format 'Q9_X'/);
});

test('fulcrum presets --json lists everything with sources', () => {
  const l = presetList() as { machines: unknown[]; gpus: { source: string }[]; hosts: unknown[]; models: unknown[] };
  assert.equal(l.machines.length, MACHINE_PRESETS.length);
  assert.equal(l.models.length, MODEL_PRESET_DEFS.length);
  assert.ok(l.gpus.every((g) => g.source.length > 0));
});
