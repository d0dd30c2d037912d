// Online workloads for NEO/APEX simulation: Poisson arrivals at a rate, prompt and output
// lengths from a distribution, all from one seed so runs repeat exactly.

import { seededRandom } from '../../model/seeded-random';
import { type OnlineRequest, makeRequest } from '../neo/request';

export type LengthDistribution =
  | { kind: 'fixed'; tokens: number }
  /** NEO §5.1 synthetic workloads: uniform in [0.9·mean, 1.1·mean]. */
  | { kind: 'uniform-10pct'; mean: number }
  | { kind: 'uniform'; min: number; max: number }
  /** Exponential around a mean, clamped to [min, max] (long-tailed chat/code traces). */
  | { kind: 'exponential'; mean: number; min: number; max: number };

export interface WorkloadSpec {
  /** Requests per second; Infinity = all requests arrive at t = 0 (throughput runs). */
  rate: number;
  count: number;
  prompt: LengthDistribution;
  output: LengthDistribution;
  seed: number;
}

function sample(d: LengthDistribution, rnd: () => number, what: string): number {
  let v: number;
  switch (d.kind) {
    case 'fixed': v = d.tokens; break;
    case 'uniform-10pct': v = d.mean * (0.9 + 0.2 * rnd()); break;
    case 'uniform': v = d.min + (d.max - d.min) * rnd(); break;
    case 'exponential': v = Math.min(d.max, Math.max(d.min, -d.mean * Math.log(1 - rnd()))); break;
  }
  const n = Math.max(1, Math.round(v));
  if (!Number.isFinite(n)) throw new Error(`workload: ${what} length distribution produced ${v}`);
  return n;
}

export function generateWorkload(spec: WorkloadSpec): OnlineRequest[] {
  if (!Number.isInteger(spec.count) || spec.count < 1 || spec.count > 1e6) throw new Error(`workload: count must be an integer in [1, 1e6], got ${spec.count}`);
  if (!(spec.rate > 0)) throw new Error(`workload: rate must be > 0 requests/s, got ${spec.rate}`);
  const rnd = seededRandom(spec.seed);
  const out: OnlineRequest[] = [];
  let t = 0;
  for (let i = 0; i < spec.count; i++) {
    if (Number.isFinite(spec.rate)) t += (-Math.log(1 - rnd()) / spec.rate) * 1e3; // exponential gaps (ms)
    out.push(makeRequest(i, t, sample(spec.prompt, rnd, 'prompt'), sample(spec.output, rnd, 'output')));
  }
  return out;
}
