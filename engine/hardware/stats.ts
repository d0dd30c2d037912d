// Summary statistics of benchmark timings: the median is the figure the profile keeps (robust
// to a stray slow run while other work shares the machine), min and max are its spread.

export interface TimingSummary {
  medianNs: number;
  minNs: number;
  maxNs: number;
  runs: number;
}

/** Throws when there is no sample or a sample is not a positive finite number of ns. */
export function summarize(ns: readonly number[]): TimingSummary {
  if (ns.length === 0) throw new Error('benchmark returned no timed runs');
  for (const v of ns) {
    if (!Number.isFinite(v) || v <= 0) throw new Error(`benchmark returned an invalid timing: ${v} ns`);
  }
  const sorted = [...ns].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const medianNs = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { medianNs, minNs: sorted[0]!, maxNs: sorted[sorted.length - 1]!, runs: sorted.length };
}

/** A rate (work per second) from a timing summary: median rate, and the spread of rates. */
export interface RateSummary {
  median: number;
  min: number;
  max: number;
  runs: number;
}

/** `unitsPerRun` of work per timed run, divided by `scale` (1e9 for GB/s or GFLOP/s). */
export function rateOf(t: TimingSummary, unitsPerRun: number, scale: number): RateSummary {
  const rate = (ns: number) => unitsPerRun / (ns * 1e-9) / scale;
  return { median: rate(t.medianNs), min: rate(t.maxNs), max: rate(t.minNs), runs: t.runs };
}

/** Rounds to `digits` significant digits, so profiles stay readable and diffable. */
export function sig(x: number, digits = 4): number {
  if (x === 0 || !Number.isFinite(x)) return x;
  return Number(x.toPrecision(digits));
}
