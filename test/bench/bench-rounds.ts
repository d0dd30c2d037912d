// The order of measurements within one row of `npm run bench:cpu`, and the figure taken from
// them. The engines alternate (Fulcrum, peer, Fulcrum, peer, …) so that a slow moment of a shared
// host (another process, a frequency dip) hits both engines' runs rather than one engine's whole
// set; each engine's figure is the median of its runs, which one such moment cannot move.
import type { BenchEngine } from './bench-child';

/** `runs` rounds of Fulcrum then (with a peer) llama.cpp. */
export function alternationOrder(runs: number, peer: boolean): BenchEngine[] {
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`runs must be a whole number ≥ 1, got ${runs}`);
  const order: BenchEngine[] = [];
  for (let i = 0; i < runs; i++) {
    order.push('fulcrum');
    if (peer) order.push('llama.cpp');
  }
  return order;
}

/** The median (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error('median of no values');
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
