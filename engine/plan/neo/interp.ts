// NEO (paper 003) §3.2: "NEO does offline profiling for typical input/output lengths and uses
// linear interpolation to approximate the values for other lengths." A piecewise-linear
// predictor over profiled (x, ms) points.

export interface ProfiledPoint { x: number; ms: number }

/**
 * Linear interpolation between profiled points, sorted by x.
 * Decisions (paper silent): below the first point we clamp to the first point's time (a kernel
 * never gets cheaper than its smallest profiled size: launch overhead dominates there); above
 * the last point we
 * extrapolate along the last segment (linear ops and attention are linear in size at the top of
 * the grid), never below the last value.
 */
export class LinearPredictor {
  private readonly xs: Float64Array;
  private readonly ys: Float64Array;

  constructor(readonly name: string, points: readonly ProfiledPoint[]) {
    if (points.length === 0) throw new Error(`predictor ${name}: no profiled points`);
    const sorted = [...points].sort((a, b) => a.x - b.x);
    for (let i = 0; i < sorted.length; i++) {
      const p = sorted[i]!;
      if (!Number.isFinite(p.x) || !Number.isFinite(p.ms) || p.ms < 0) {
        throw new Error(`predictor ${name}: point ${i} is not a finite (x, ms ≥ 0) pair: (${p.x}, ${p.ms})`);
      }
      if (i > 0 && p.x === sorted[i - 1]!.x) throw new Error(`predictor ${name}: duplicate x=${p.x}`);
    }
    this.xs = Float64Array.from(sorted, (p) => p.x);
    this.ys = Float64Array.from(sorted, (p) => p.ms);
  }

  /** Predicted ms at x. */
  at(x: number): number {
    const xs = this.xs, ys = this.ys, n = xs.length;
    if (n === 1 || x <= xs[0]!) return ys[0]!;
    if (x >= xs[n - 1]!) {
      const x0 = xs[n - 2]!, y0 = ys[n - 2]!, x1 = xs[n - 1]!, y1 = ys[n - 1]!;
      return Math.max(y1, y1 + ((y1 - y0) / (x1 - x0)) * (x - x1));
    }
    let lo = 0, hi = n - 1; // xs[lo] ≤ x < xs[hi]
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (xs[mid]! <= x) lo = mid; else hi = mid;
    }
    const x0 = xs[lo]!, x1 = xs[hi]!;
    return ys[lo]! + ((ys[hi]! - ys[lo]!) * (x - x0)) / (x1 - x0);
  }

  points(): ProfiledPoint[] {
    return Array.from(this.xs, (x, i) => ({ x, ms: this.ys[i]! }));
  }
}

/** The grid NEO-style "grid profiling" samples: 0 (when allowed), then powers of two up to max. */
export function geometricGrid(min: number, max: number, perOctave = 2): number[] {
  if (!(min > 0) || !(max >= min)) throw new Error(`grid: need 0 < min ≤ max (got ${min}, ${max})`);
  const out = new Set<number>();
  const steps = Math.ceil(Math.log2(max / min) * perOctave);
  for (let i = 0; i <= steps; i++) out.add(Math.min(max, Math.round(min * 2 ** (i / perOctave))));
  out.add(Math.round(max));
  return [...out].sort((a, b) => a - b);
}
