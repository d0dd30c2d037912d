// vec_dot of every weight format: each SIMD ISA path against the scalar path, and the scalar
// path against a float64 dot of the reference-decoded weights and reference-decoded quantized
// activations (what vec_dot computes, up to float32 accumulation).
//
// Tolerances (stated):
//  - ISA vs scalar: |simd - scalar| <= 2e-5 * Σ|w_i a_i|. Both paths see identical quantized
//    activations and exact integer block sums; they differ only in the order float32 partial
//    sums are added (≈ n_blocks * 2^-24 relative to Σ|terms|, n_blocks <= 128 here).
//  - scalar vs float64 reference: the same 2e-5 * Σ|w_i a_i|, plus for Q4_1/Q5_1 the f16
//    rounding of Q8_1's s = d*Σq: Σ_blocks |m| * |s| * 2^-11.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

import { addonPath } from '../../engine/native/addon';
import { absDot64, dot64, f16ToF32, refDequantize, refFormat, type RefFormat } from '../helpers/quant-reference';
import { Rng, gaussianVector, randomBlocks } from '../helpers/quant-random';

const built = existsSync(addonPath());
const skip = built ? false : `native addon not built (${addonPath()}); run node scripts/build-native.mjs`;
const REL = 2e-5;

async function quant() {
  return import('../../engine/native/quant');
}

const WEIGHT_FORMATS = ['Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0', 'Q4_K', 'Q5_K', 'Q6_K'];
const ACT_OF: Record<string, string> = {
  Q4_0: 'Q8_0', Q5_0: 'Q8_0', Q8_0: 'Q8_0', Q4_1: 'Q8_1', Q5_1: 'Q8_1', Q4_K: 'Q8_K', Q5_K: 'Q8_K', Q6_K: 'Q8_K',
};

// Σ_blocks |m| * |s| * 2^-11 for an offset format dotted with Q8_1 activations.
function sRoundingAllowance(w: RefFormat, wb: Uint8Array, act: Uint8Array): number {
  if (w.name !== 'Q4_1' && w.name !== 'Q5_1') return 0;
  let a = 0;
  for (let k = 0; k < wb.length / w.typeSize; k++) {
    const m = f16ToF32((wb[k * w.typeSize + 2] ?? 0) | ((wb[k * w.typeSize + 3] ?? 0) << 8));
    const s = f16ToF32((act[k * 36 + 2] ?? 0) | ((act[k * 36 + 3] ?? 0) << 8));
    a += Math.abs(m * s) * 2 ** -11;
  }
  return a;
}

interface Case { label: string; weights: Uint8Array; act: Float32Array }

function cases(ref: RefFormat, rng: Rng, quantize: (t: number, x: Float32Array) => Uint8Array): Case[] {
  const out: Case[] = [];
  for (const n of [ref.blockSize, 3 * ref.blockSize, 4096]) {
    out.push({ label: `quantized Gaussian n=${n}`, weights: quantize(ref.typeId, gaussianVector(n, rng, 0.05)), act: gaussianVector(n, rng) });
    // raw random blocks; f16 scales in [2^-10, 2^0] keep every product finite and meaningful
    out.push({ label: `random bytes n=${n}`, weights: randomBlocks(ref, n / ref.blockSize, rng, [5, 15]), act: gaussianVector(n, rng, 3) });
  }
  const n = 2 * ref.blockSize;
  out.push({ label: 'zero activations', weights: randomBlocks(ref, 2, rng, [5, 15]), act: new Float32Array(n) });
  const big = gaussianVector(n, rng, 1);
  big[5] = 1e4;  // one outlier dominates the activation scale
  out.push({ label: 'outlier activation', weights: randomBlocks(ref, 2, rng, [5, 15]), act: big });
  return out;
}

for (const name of WEIGHT_FORMATS) {
  test(`vecDot ${name}: every ISA equals scalar, scalar equals the float reference`, { skip }, async (t) => {
    const q = await quant();
    const ref = refFormat(name);
    const actRef = refFormat(ACT_OF[name] ?? '');
    const rng = new Rng(0x7777 + ref.typeId);
    const isas = q.quantIsas();
    for (const isa of ['avx2', 'avxvnni', 'avx512'] as const) {
      if (!isas.includes(isa)) t.diagnostic(`${name}: ${isa} path skipped: this CPU (or FULCRUM_ISA) does not run it`);
    }
    for (const c of cases(ref, rng, (t, x) => q.quantize(t, x))) {
      const wf = refDequantize(ref, c.weights);
      const qa = q.quantize(actRef.typeId, c.act, 'scalar');
      const af = refDequantize(actRef, qa);
      const scale = absDot64(wf, af);
      const expected = dot64(wf, af);
      const scalar = q.vecDot(ref.typeId, c.weights, c.act, 'scalar');
      const tolRef = REL * scale + sRoundingAllowance(ref, c.weights, qa) + 1e-30;
      assert.ok(Math.abs(scalar - expected) <= tolRef,
        `${name} ${c.label}: scalar ${scalar} vs reference ${expected} (tolerance ${tolRef})`);
      for (const isa of isas) {
        const got = q.vecDot(ref.typeId, c.weights, c.act, isa);
        const tol = REL * scale + 1e-30;
        assert.ok(Math.abs(got - scalar) <= tol, `${name} ${c.label}: ${isa} ${got} vs scalar ${scalar} (tolerance ${tol})`);
      }
    }
  });
}

test('vecDot without isa uses the best path and agrees with it', { skip }, async () => {
  const q = await quant();
  const isas = q.quantIsas();
  const best = isas[isas.length - 1];
  const rng = new Rng(5);
  const w = q.quantize(12, gaussianVector(1024, rng));
  const a = gaussianVector(1024, rng);
  assert.equal(q.vecDot(12, w, a), q.vecDot(12, w, a, best));
});
