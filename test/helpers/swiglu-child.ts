// Child of test/unit/swiglu.test.ts (FULCRUM_ISA set by the parent, as the ISA is chosen once per
// process): runs kernels.swiglu over inputs that cover every lane position, both signs, the
// exponential's clamp (gate ≤ −87) and large up values, and prints the ISA level and the worst
// relative error against silu(g)·u computed in float64.
import { loadAddon } from '../../engine/native/addon';

const k = loadAddon<{ kernels: { swiglu(g: Float32Array, u: Float32Array): Float32Array; isaLevel(): string } }>().kernels;
const special = [0, -0, 1e-6, -1e-6, 0.5, -0.5, 1, -1, 5, -5, 20, -20, 60, -60, 86.9, -86.9, 87.5, -87.5, 100, -100, 1e4, -1e4];
const n = 4099;  // not a multiple of 16 or 8: the scalar tail runs too
const gate = new Float32Array(n), up = new Float32Array(n);
let s = 12345;
const rnd = (): number => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 4294967296; };
for (let i = 0; i < n; i++) {
  gate[i] = i < special.length ? special[i]! : (rnd() - 0.5) * (i % 3 === 0 ? 40 : 8);
  up[i] = (rnd() - 0.5) * (i % 5 === 0 ? 1e3 : 4);
}
const out = k.swiglu(gate, up);
let worst = 0, worstAt = -1;
for (let i = 0; i < n; i++) {
  const g = gate[i]!, ref = (g / (1 + Math.exp(-g))) * up[i]!;
  // Relative to |ref|, with an absolute floor where silu(g)·u underflows toward 0.
  const err = Math.abs(out[i]! - ref) / Math.max(Math.abs(ref), 1e-30 * Math.abs(up[i]!), 1e-37);
  if (err > worst) { worst = err; worstAt = i; }
}
process.stdout.write(`${JSON.stringify({ isa: k.isaLevel(), worst, worstAt, gate: gate[worstAt], out: out[worstAt] })}\n`);
