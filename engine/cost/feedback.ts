// Measured feedback (issue 21 item 4): a correction of the profile's cost model learned from the
// steps the executor runs. The profile stays as measured; this is a separate layer of factors,
// one per op class (lane × kind of work × weight format × rows of the step), each the running
// ratio measured ÷ predicted-by-the-profile. The cost model multiplies its times by the factor of
// their class once the class has enough steps behind it (engine/cost/model.ts).
//
// It also decides when the profile disagrees with what runs: over a window of steps (one noisy
// step never decides), the median ratio is more than 25 % off.

import type { OpWork } from './types';

/**
 * The lanes a measured op runs on, as the executor names them; a CPU op in a step where the
 * device or a copy also ran is its own lane, 'cpu beside device' (the cost model's contended CPU
 * time: sharing memory bandwidth and, with the loopback device, cores), so a hybrid plan's CPU
 * slowdown does not correct a CPU-only plan.
 */
export type FeedbackLane = 'cpu' | 'cpu beside device' | 'device' | 'h2d' | 'd2h';

/** Row-count buckets: decode (1 row), a few rows (drafts, small batches), a prompt chunk, a large batch. */
const BUCKETS: { max: number; label: string }[] = [
  { max: 1, label: '1' }, { max: 8, label: '2-8' }, { max: 64, label: '9-64' }, { max: Infinity, label: '65+' },
];

export function rowBucket(rows: number): string {
  return BUCKETS.find((b) => rows <= b.max)!.label;
}

/**
 * Size buckets of the bytes an op touches (weights, KV, activations). Decision: below 1 MiB an op
 * runs from the core's own caches and its time is mostly fixed costs; up to 32 MiB from the
 * last-level cache of a desktop; beyond, from DRAM. A factor learned on a tiny model's ops (all
 * fixed cost) must not correct a 7B model's (all bandwidth).
 */
const SIZES: { max: number; label: string }[] = [
  { max: 2 ** 20, label: '<1MiB' }, { max: 32 * 2 ** 20, label: '<32MiB' }, { max: Infinity, label: '≥32MiB' },
];

type WorkFields = Pick<OpWork, 'kind' | 'weightBytes' | 'format' | 'kvReadBytes' | 'actInBytes' | 'actOutBytes' | 'groupBytes'>;

export function sizeBucket(work: WorkFields): string {
  const bytes = work.groupBytes ?? work.weightBytes + work.kvReadBytes + work.actInBytes + work.actOutBytes;
  return SIZES.find((b) => bytes < b.max)!.label;
}

/** The class of one op's work on a compute lane: its matmul format, attention, or the rest. */
export function workClass(work: Pick<OpWork, 'kind' | 'weightBytes' | 'format'>): string {
  if (work.kind === 'scores' || work.kind === 'softmax' || work.kind === 'wv') return 'attention';
  if (work.weightBytes > 0) return `matmul ${work.format || '?'}`;
  return 'other';
}

/**
 * The key a time is corrected under: e.g. 'cpu matmul Q8_0 @1 <32MiB' (decode rows, a matrix of
 * up to 32 MiB), 'device attention @9-64 <1MiB', 'h2d copy @1' (a copy in a step of 1 row).
 * Decision: copies are keyed by the rows of the step they run in too. A copy shares the cores and
 * the memory with the step's compute, so its rate depends on the step: on the loopback link the
 * weight copies of prompt steps measured 2.9–4.1 × the profile's time, those of decode steps
 * 1.3–1.6 × (gpu-only, kvpr, split-points on the 0.5B model). One key for both gave decode plans
 * the prompt steps' rate (the last steps folded): split-points' streamed layers, bound by H2D,
 * were predicted up to twice too slow after the correction.
 */
export function correctionKey(lane: FeedbackLane, work: WorkFields | 'copy', rows: number): string {
  if (work === 'copy') return `${lane} copy @${rowBucket(rows)}`;
  return `${lane} ${workClass(work)} @${rowBucket(rows)} ${sizeBucket(work)}`;
}

/** One measured op (or several of one class in a step) next to the profile's prediction for it. */
export interface FeedbackSample {
  key: string;
  measuredMs: number;
  predictedMs: number;
}

/** What the cost model applies: a factor per key (measured ÷ profile), from `steps` folded steps. */
export interface CostCorrection {
  /** Steps folded in over all keys (the number the plan's cost source reports). */
  steps: number;
  /** Only keys with at least the minimum number of steps. */
  factors: Readonly<Record<string, number>>;
}

/** Checks a correction that came from outside (a request's JSON); errors name the field. */
export function checkCorrection(raw: unknown, where: string): CostCorrection {
  const r = raw as Partial<CostCorrection> | null;
  if (typeof r !== 'object' || r === null) throw new Error(`${where} must be an object with "steps" and "factors"`);
  if (!Number.isInteger(r.steps) || r.steps! < 0) throw new Error(`${where}.steps must be an integer ≥ 0, got ${JSON.stringify(r.steps)}`);
  if (typeof r.factors !== 'object' || r.factors === null || Array.isArray(r.factors)) throw new Error(`${where}.factors must be an object of key → factor`);
  for (const [k, v] of Object.entries(r.factors)) {
    if (typeof v !== 'number' || !(v >= 1 / RATIO_CLAMP && v <= RATIO_CLAMP)) throw new Error(`${where}.factors["${k}"] must be a number in [0.1, 10], got ${JSON.stringify(v)}`);
  }
  return { steps: r.steps!, factors: r.factors };
}

export function correctionFactor(c: CostCorrection | undefined, key: string): number {
  return c?.factors[key] ?? 1;
}

/**
 * The factor for a time of `work` on `lane` at `rows`: its own row bucket's, else a neighbouring
 * bucket's (Decision: 2–8 rows of decode stream the weights like 1 row does, a prompt chunk of
 * 9–64 rows is nearer 65+ than 1; one bucket away only), else 1.
 */
export function correctionFactorOf(c: CostCorrection | undefined, lane: FeedbackLane, work: WorkFields, rows: number): number {
  return bucketedFactor(c, rows, (bucket) => `${lane} ${workClass(work)} @${bucket} ${sizeBucket(work)}`) ?? 1;
}

/** The factor under `keyAt(rows' bucket)`, else under a neighbouring bucket's key (one away only). */
function bucketedFactor(c: CostCorrection | undefined, rows: number, keyAt: (bucket: string) => string): number | undefined {
  if (!c) return undefined;
  const bucket = rowBucket(rows);
  const own = c.factors[keyAt(bucket)];
  if (own !== undefined) return own;
  const i = BUCKETS.findIndex((b) => b.label === bucket);
  for (const j of [i - 1, i + 1]) {
    const b = BUCKETS[j];
    const f = b ? c.factors[keyAt(b.label)] : undefined;
    if (f !== undefined) return f;
  }
  return undefined;
}

/**
 * The factor for a copy over `lane` in a step of `rows` rows: its own row bucket's, else a
 * neighbouring bucket's (as correctionFactorOf), else the one rate corrections saved before
 * copies had buckets ('h2d copy'), else 1.
 */
export function copyFactorOf(c: CostCorrection | undefined, lane: 'h2d' | 'd2h', rows: number): number {
  return bucketedFactor(c, rows, (bucket) => `${lane} copy @${bucket}`) ?? c?.factors[`${lane} copy`] ?? 1;
}

/** The cost source a plan reports when a correction changed its times. */
export function correctionSourceText(c: CostCorrection | undefined): string | undefined {
  if (!c || Object.keys(c.factors).length === 0) return undefined;
  return `profile + measured correction (${c.steps} steps)`;
}

export interface FeedbackOptions {
  /** Weight of the newest step in the running factor (exponentially weighted, in log space). */
  alpha: number;
  /** Steps a key needs before its factor is applied. */
  minSteps: number;
  /** Steps the disagreement decision looks at (the median of their ratios). */
  window: number;
  /** Relative disagreement reported (0.25: measured more than 25 % above or below the profile). */
  tolerance: number;
}

/**
 * Decision: α 0.2 (a factor settles in ~15 steps, a few seconds of decode), 8 steps before it is
 * applied, a window of 16 steps for the 25 % decision. One step's ratio is clamped to [1/10, 10]
 * so that a step stalled by the OS (a preemption of the pool's thread) cannot swing the factor.
 */
export const DEFAULT_FEEDBACK: FeedbackOptions = { alpha: 0.2, minSteps: 8, window: 16, tolerance: 0.25 };
const RATIO_CLAMP = 10;

interface Entry {
  /** Running log(measured / predicted). */
  logFactor: number;
  steps: number;
  /** The last `window` steps (measured and predicted ms, ratio), oldest first. */
  recent: { m: number; p: number; ratio: number }[];
  /** Whether this key's disagreement was reported (cleared once it agrees again). */
  reported: boolean;
}

/** A key whose measured steps disagree with the profile over a whole window. */
export interface Disagreement {
  key: string;
  /** Median of the window's measured ÷ predicted. */
  ratio: number;
  /** Median measured and predicted ms per step of this key over the window. */
  measuredMs: number;
  predictedMs: number;
  steps: number;
}

export function describeDisagreement(d: Disagreement): string {
  const pct = Math.round((d.ratio - 1) * 100);
  return `${d.key}: measured ${fmtMs(d.measuredMs)} vs predicted ${fmtMs(d.predictedMs)} per step (${pct > 0 ? '+' : ''}${pct} %, median of the last ${d.steps} steps)`;
}

function fmtMs(ms: number): string {
  return ms >= 10 ? `${ms.toFixed(1)} ms` : ms >= 0.1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(1)} µs`;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The running correction: fold each executed step's samples in; read factors for the next plan. */
export class MeasuredCorrection {
  readonly options: FeedbackOptions;
  private readonly entries = new Map<string, Entry>();
  private folded = 0;

  constructor(options: Partial<FeedbackOptions> = {}) {
    this.options = { ...DEFAULT_FEEDBACK, ...options };
    const o = this.options;
    if (!(o.alpha > 0 && o.alpha <= 1)) throw new Error(`feedback: alpha must be in (0, 1], got ${o.alpha}`);
    if (!Number.isInteger(o.minSteps) || o.minSteps < 1) throw new Error(`feedback: minSteps must be an integer ≥ 1, got ${o.minSteps}`);
    if (!Number.isInteger(o.window) || o.window < 1) throw new Error(`feedback: window must be an integer ≥ 1, got ${o.window}`);
    if (!(o.tolerance > 0)) throw new Error(`feedback: tolerance must be > 0, got ${o.tolerance}`);
  }

  /** Steps folded in. */
  get steps(): number { return this.folded; }

  /**
   * Folds one executed step: its samples are summed per key (one ratio per key and step), each
   * key's factor moves toward the step's ratio, and keys whose window now disagrees beyond the
   * tolerance are returned (each once, until it agrees again).
   */
  fold(samples: readonly FeedbackSample[]): Disagreement[] {
    const perKey = new Map<string, { m: number; p: number }>();
    for (const s of samples) {
      if (!(s.measuredMs >= 0) || !(s.predictedMs > 0) || !Number.isFinite(s.measuredMs) || !Number.isFinite(s.predictedMs)) continue;
      const t = perKey.get(s.key) ?? { m: 0, p: 0 };
      t.m += s.measuredMs;
      t.p += s.predictedMs;
      perKey.set(s.key, t);
    }
    if (perKey.size === 0) return [];
    this.folded++;
    const out: Disagreement[] = [];
    const { alpha, window, tolerance } = this.options;
    for (const [key, { m, p }] of perKey) {
      const ratio = Math.min(RATIO_CLAMP, Math.max(1 / RATIO_CLAMP, m / p));
      let e = this.entries.get(key);
      if (!e) {
        e = { logFactor: Math.log(ratio), steps: 0, recent: [], reported: false };
        this.entries.set(key, e);
      } else {
        e.logFactor += alpha * (Math.log(ratio) - e.logFactor);
      }
      e.steps++;
      e.recent.push({ m, p, ratio });
      if (e.recent.length > window) e.recent.shift();
      if (e.recent.length < window) continue;
      const med = median(e.recent.map((x) => x.ratio));
      const off = Math.abs(med - 1) > tolerance;
      if (off && !e.reported) {
        e.reported = true;
        out.push({ key, ratio: med, measuredMs: median(e.recent.map((x) => x.m)), predictedMs: median(e.recent.map((x) => x.p)), steps: e.recent.length });
      } else if (!off) {
        e.reported = false;
      }
    }
    return out;
  }

  /** Factor of `key` (1 until the key has minSteps steps). */
  factor(key: string): number {
    const e = this.entries.get(key);
    return e && e.steps >= this.options.minSteps ? Math.exp(e.logFactor) : 1;
  }

  /** Steps folded for `key`. */
  stepsOf(key: string): number {
    return this.entries.get(key)?.steps ?? 0;
  }

  /** What the cost model applies (immutable; later folds do not change it). */
  snapshot(): CostCorrection {
    const factors: Record<string, number> = {};
    for (const [k, e] of this.entries) if (e.steps >= this.options.minSteps) factors[k] = Number(Math.min(RATIO_CLAMP, Math.max(1 / RATIO_CLAMP, Math.exp(e.logFactor))).toPrecision(4));
    return { steps: this.folded, factors };
  }

  /** Forgets every key matching `which` (after the profile's figures for it were measured again). */
  reset(which: (key: string) => boolean = () => true): void {
    for (const k of [...this.entries.keys()]) if (which(k)) this.entries.delete(k);
  }

  /**
   * Whether `key`'s measured steps agree with the profile. Decision: only a full window of steps
   * judges; before it, the answer is 'not enough steps' (with how many it has and needs), never
   * 'agrees' — a prefill class that saw 2–6 chunks once read as agreeing while the profile behind
   * it was 23 % off.
   */
  verdict(key: string): KeyVerdict {
    const e = this.entries.get(key);
    const { window, tolerance } = this.options;
    if (!e || e.recent.length < window) return { state: 'not enough steps', steps: e?.steps ?? 0, needed: window };
    const ratio = median(e.recent.map((x) => x.ratio));
    return { state: Math.abs(ratio - 1) > tolerance ? 'disagrees' : 'agrees', steps: e.steps, needed: window, ratio: Number(ratio.toPrecision(3)) };
  }

  /** Every key, for inspection: factor, steps, whether it applies, and its verdict. */
  describe(): { key: string; factor: number; steps: number; applied: boolean; verdict: KeyVerdict }[] {
    return [...this.entries].map(([key, e]) => ({ key, factor: Number(Math.exp(e.logFactor).toPrecision(4)), steps: e.steps, applied: e.steps >= this.options.minSteps, verdict: this.verdict(key) }))
      .sort((a, b) => a.key.localeCompare(b.key));
  }

  /** The persisted form: running factors and step counts (the window starts empty again). */
  toJSON(): FeedbackState {
    const factor = (e: Entry) => Number(Math.min(RATIO_CLAMP, Math.max(1 / RATIO_CLAMP, Math.exp(e.logFactor))).toPrecision(6));
    return { steps: this.folded, entries: Object.fromEntries([...this.entries].map(([k, e]) => [k, { factor: factor(e), steps: e.steps }])) };
  }

  static fromJSON(raw: unknown, where: string, options: Partial<FeedbackOptions> = {}): MeasuredCorrection {
    const c = new MeasuredCorrection(options);
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error(`${where}: expected an object with "steps" and "entries"`);
    const r = raw as Record<string, unknown>;
    if (!Number.isInteger(r.steps) || (r.steps as number) < 0) throw new Error(`${where}: "steps" must be an integer ≥ 0, got ${JSON.stringify(r.steps)}`);
    if (typeof r.entries !== 'object' || r.entries === null || Array.isArray(r.entries)) throw new Error(`${where}: "entries" must be an object`);
    c.folded = r.steps as number;
    for (const [k, v] of Object.entries(r.entries as Record<string, unknown>)) {
      const e = v as { factor?: unknown; steps?: unknown } | null;
      const factor = e?.factor, steps = e?.steps;
      if (typeof factor !== 'number' || !(factor >= 1 / RATIO_CLAMP && factor <= RATIO_CLAMP)) throw new Error(`${where}: entries["${k}"].factor must be a number in [0.1, 10], got ${JSON.stringify(factor)}`);
      if (!Number.isInteger(steps) || (steps as number) < 1) throw new Error(`${where}: entries["${k}"].steps must be an integer ≥ 1, got ${JSON.stringify(steps)}`);
      c.entries.set(k, { logFactor: Math.log(factor), steps: steps as number, recent: [], reported: false });
    }
    return c;
  }
}

/** A key's verdict: judged on a full window of steps, else 'not enough steps'. */
export interface KeyVerdict {
  state: 'agrees' | 'disagrees' | 'not enough steps';
  steps: number;
  /** Steps a judgement needs (the window). */
  needed: number;
  /** Median measured ÷ predicted over the window (judged states only). */
  ratio?: number;
}

export interface FeedbackState {
  steps: number;
  entries: Record<string, { factor: number; steps: number }>;
}
