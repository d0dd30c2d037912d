// Native dequantization of every block format against the independent TypeScript decoder in
// test/helpers/quant-reference.ts, bit for bit, on random raw blocks (random bytes, finite
// scales incl. subnormal f16) and on edge-case blocks, for every ISA path this CPU runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

import { addonPath } from '../../engine/native/addon';
import { ggmlTypeInfo } from '../../engine/model/ggml-types';
import { REF_FORMATS, refDequantize, type RefFormat } from '../helpers/quant-reference';
import { Rng, firstBitMismatch, randomBlocks } from '../helpers/quant-random';

const built = existsSync(addonPath());
const skip = built ? false : `native addon not built (${addonPath()}); run node scripts/build-native.mjs`;

async function quant() {
  return import('../../engine/native/quant');
}

function assertSameBits(got: Float32Array, want: Float32Array, what: string): void {
  const i = firstBitMismatch(got, want);
  assert.equal(i, -1, `${what}: element ${i} is ${got[i]}, reference ${want[i]}`);
}

test('quant formats: sizes match ggml-types.ts and the reference layouts', { skip }, async () => {
  const q = await quant();
  const formats = q.quantFormats();
  assert.equal(formats.length, REF_FORMATS.length);
  for (const fmt of formats) {
    const info = ggmlTypeInfo(fmt.typeId);
    assert.ok(info, `type ${fmt.typeId}`);
    assert.equal(fmt.name, info.name);
    assert.equal(fmt.blockSize, info.blockSize, `${fmt.name} block size`);
    assert.equal(fmt.typeSize, info.typeSize, `${fmt.name} type size`);
    const ref = REF_FORMATS.find((r) => r.typeId === fmt.typeId);
    assert.ok(ref, `reference decoder for ${fmt.name}`);
    assert.equal(ref.typeSize, fmt.typeSize);
    assert.equal(ref.blockSize, fmt.blockSize);
  }
});

for (const ref of REF_FORMATS) {
  test(`dequantize ${ref.name}: random raw blocks equal the reference bit for bit, every ISA`, { skip }, async () => {
    const q = await quant();
    const rng = new Rng(0x51ed + ref.typeId);
    const nBlocks = ref.blockSize === 32 ? 257 : 33;
    const data = randomBlocks(ref, nBlocks, rng);
    const want = refDequantize(ref, data);
    for (const isa of q.quantIsas()) {
      assertSameBits(q.dequantize(ref.typeId, data, nBlocks * ref.blockSize, isa), want, `${ref.name}/${isa}`);
    }
  });

  test(`dequantize ${ref.name}: edge-case blocks equal the reference`, { skip }, async () => {
    const q = await quant();
    const blocks = edgeBlocks(ref);
    const want = refDequantize(ref, blocks);
    for (const isa of q.quantIsas()) {
      assertSameBits(q.dequantize(ref.typeId, blocks, want.length, isa), want, `${ref.name}/${isa} edge`);
    }
    // A zero block decodes to zeros (all fields 0, incl. scales).
    const zero = q.dequantize(ref.typeId, new Uint8Array(ref.typeSize), ref.blockSize);
    assert.ok(zero.every((v) => v === 0), `${ref.name}: zero block`);
  });
}

// Blocks whose quant bytes are all 0x00, all 0xFF or alternating, under extreme finite scales:
// largest f16 (65504), smallest subnormal (2^-24), negative one, and zero.
function edgeBlocks(ref: RefFormat): Uint8Array {
  const f16s = [0x7bff, 0x0001, 0xbc00, 0x0000, 0x3c00];
  const fills = [0x00, 0xff, 0x55, 0xaa];
  const out = new Uint8Array(f16s.length * fills.length * ref.typeSize);
  const dv = new DataView(out.buffer);
  let k = 0;
  for (const h of f16s) {
    for (const fill of fills) {
      const off = k++ * ref.typeSize;
      out.fill(fill, off, off + ref.typeSize);
      for (const o of ref.f16Fields) dv.setUint16(off + o, h, true);
      for (const o of ref.f32Fields) dv.setFloat32(off + o, h === 0 ? 0 : h === 0x7bff ? 3.0e38 / 128 : -1e-30, true);
    }
  }
  return out;
}
