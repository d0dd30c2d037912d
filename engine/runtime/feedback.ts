// The runtime's side of measured feedback (issue 21 item 4): every executed step's per-op times,
// next to what the profile's cost model predicts for the same ops at the step's own shape (rows,
// context per sequence), folded into the running correction (engine/cost/feedback.ts). The
// engine calls `observe` after each native evaluation (engine/runtime/engine.ts).
import { correctionKey, type Disagreement, type FeedbackSample, MeasuredCorrection } from '../cost/feedback';
import { ProfileCostModel } from '../cost/model';
import { headWork, layerWork } from '../cost/ops';
import type { OpWork } from '../cost/types';
import type { HardwareProfile } from '../hardware/types';
import { profileNoise } from '../hardware/validate';
import type { ModelShape } from '../model/shape';
import { planOpTimes, type MeasuredTrace, type PlanOpTime } from './trace';

/** What one sequence contributed to an evaluation: its new rows and the positions before them. */
export interface SequenceStep { rows: number; context: number }

export interface RuntimeFeedbackOptions {
  /** The running correction to fold into (shared between engines, or read from disk); default a new one. */
  correction?: MeasuredCorrection;
  /** The profile to predict with when the engine has no device plan (the CPU alone). */
  profile?: HardwareProfile;
  /** Told before every evaluation (sampled or not): work is running (a background re-measure yields to it). */
  onEvaluation?: () => void;
  /** Told when a class of ops disagrees with the profile by more than the tolerance over a window. */
  onDisagreement?: (found: Disagreement[]) => void;
  /** Told with the correction at most every `persistEveryMs` of folding, and at dispose (to save it). */
  persist?: (c: MeasuredCorrection) => void;
  persistEveryMs?: number;
  /**
   * Fold one evaluation in this many (default 4): timing every op and joining it with the cost
   * model costs ~0.7 ms per step of a 24-layer model here, 3 % of a 0.5B model's decode step;
   * one step in four keeps it below 1 %. Steps between are executed without per-op timing.
   */
  sampleEvery?: number;
}

export const DEFAULT_SAMPLE_EVERY = 4;

/** Cost-model work names of each native plan op (llama family names first, then OPT's). */
const WORK_NAMES: Record<string, string[]> = {
  attn_norm: ['attn_norm', 'LN.0'], Q: ['Q'], K: ['K'], V: ['V'], RoPE: ['RoPE'], Output: ['Output'],
  ffn_norm: ['ffn_norm', 'LN.1'], Gate: ['Gate'], Up: ['Up', 'FC.0'], Down: ['Down', 'FC.1'],
};
const ATTENTION_WORK = ['Scores', 'Softmax', 'WV'];
const HAND_OFF_MS = 0.02;
const NOISY_PROFILE_MIN_STEPS = 3;
/** Native op kinds that move data between memories (not compute). */
const COPY_KINDS = new Set(['copy_weight', 'copy_kv', 'copy_acts', 'copy_rows', 'copy_cols']);

export class StepFeedback {
  readonly correction: MeasuredCorrection;
  private readonly cost: ProfileCostModel;
  private lastPersist = Date.now();
  /** Evaluations not folded (several native steps in one call, so rows per step unknown). */
  skipped = 0;
  private evaluations = 0;
  readonly sampleEvery: number;

  constructor(private readonly shape: ModelShape, hardware: HardwareProfile, private readonly opts: RuntimeFeedbackOptions = {}) {
    // A profile whose own probes disagreed is trusted less: its correction applies after 3 steps, not 8.
    this.correction = opts.correction ?? new MeasuredCorrection(profileNoise(hardware) ? { minSteps: NOISY_PROFILE_MIN_STEPS } : {});
    // The profile's own prediction, uncorrected: the correction is measured against it.
    this.cost = new ProfileCostModel(shape, hardware);
    this.sampleEvery = opts.sampleEvery ?? DEFAULT_SAMPLE_EVERY;
    if (!Number.isInteger(this.sampleEvery) || this.sampleEvery < 1) throw new Error(`feedback: sampleEvery must be an integer ≥ 1, got ${this.sampleEvery}`);
  }

  /** Whether the next evaluation is timed and folded (counts it). */
  nextIsSampled(): boolean {
    return this.evaluations++ % this.sampleEvery === 0;
  }

  /**
   * Folds the trace of one evaluation (`seqs`: its sequences; `outRows`: rows whose logits were
   * computed). Returns the classes that now disagree with the profile (also told to onDisagreement).
   */
  observe(trace: MeasuredTrace, seqs: SequenceStep[], outRows: number): Disagreement[] {
    const steps = new Set(trace.events.map((e) => e.step));
    if (steps.size !== 1 || seqs.length === 0) {
      if (steps.size > 1) this.skipped++;
      return [];
    }
    const found = this.correction.fold(this.samples(trace, [...steps][0]!, seqs, outRows));
    if (found.length) this.opts.onDisagreement?.(found);
    if (this.opts.persist && Date.now() - this.lastPersist >= (this.opts.persistEveryMs ?? 30_000)) this.persist();
    return found;
  }

  /** An evaluation starts (see RuntimeFeedbackOptions.onEvaluation). */
  evaluating(): void {
    this.opts.onEvaluation?.();
  }

  persist(): void {
    this.lastPersist = Date.now();
    if (this.correction.steps > 0) this.opts.persist?.(this.correction);
  }

  /** Measured next to predicted per op class for one native step. */
  samples(trace: MeasuredTrace, step: number, seqs: SequenceStep[], outRows: number): FeedbackSample[] {
    const rows = seqs.reduce((n, s) => n + s.rows, 0);
    const maxContext = Math.max(...seqs.map((s) => s.context));
    const work = new Map(layerWork(this.shape, { batch: 1, newTokens: rows, context: maxContext }).map((w) => [w.name, w]));
    // Attention is per sequence (each over its own keys), as the fused kernel runs it.
    const attention = seqs.map((s) => layerWork(this.shape, { batch: 1, newTokens: s.rows, context: s.context }).filter((w) => ATTENTION_WORK.includes(w.name)));
    const times = planOpTimes(trace, step);
    // An op computed on two lanes at once (a matmul split by rows, attention split by sequence)
    // has a share on each that the trace does not name: left out.
    const lanesOf = new Map<string, Set<string>>();
    for (const t of times) {
      if (t.lane !== 'cpu' && t.lane !== 'device') continue;
      const k = `${t.layer}/${t.planOp}`;
      lanesOf.set(k, (lanesOf.get(k) ?? new Set()).add(t.lane));
    }
    // CPU ops of a step in which the device or a copy ran too are timed against the contended prediction.
    const beside = times.some((t) => t.lane !== 'cpu');
    const out: FeedbackSample[] = [];
    const predicted = new Map<string, { key: string; ms: number } | null>();
    for (const t of times) {
      const split = (lanesOf.get(`${t.layer}/${t.planOp}`)?.size ?? 0) > 1;
      if (t.lane === 'cpu' || t.lane === 'device') {
        if (split) continue;
        // The cost model's per-op time includes the op's fixed cost (the pool's hand-off between
        // ops, fitted end to end by the calibration), which falls between the ops the trace times:
        // each op is charged the idle time of its lane before it. Beside a device a longer idle
        // time is a wait for the other lane, not a fixed cost (Decision: up to 20 µs is a hand-off).
        const handOff = (g: number) => (beside ? (g <= HAND_OFF_MS ? g : 0) : g);
        const measured = Object.entries(t.byKind).filter(([k]) => !COPY_KINDS.has(k)).reduce((s, [, v]) => s + v, 0)
          + t.gapsMs.reduce((s, g) => s + handOff(g), 0);
        // Every layer has the same work: one prediction per plan op and lane for the whole step.
        const k = `${t.planOp}/${t.lane}`;
        let p = predicted.get(k);
        if (p === undefined) { p = this.predict(t, work, attention, rows, outRows, beside) ?? null; predicted.set(k, p); }
        if (p) out.push({ key: p.key, measuredMs: measured, predictedMs: p.ms });
      } else if (t.lane === 'h2d' && t.byKind.copy_weight !== undefined) {
        const w = this.workOf(t.planOp, work, outRows);
        if (!w || split || !(w.weightBytes > 0)) continue;
        out.push({ key: correctionKey('h2d', 'copy', rows), measuredMs: t.byKind.copy_weight, predictedMs: this.cost.transferMs(w.weightBytes, 'h2d', true, rows) });
      }
    }
    return out;
  }

  private workOf(planOp: string, work: Map<string, OpWork>, outRows: number): OpWork | undefined {
    if (planOp === 'LM head') return headWork(this.shape, outRows);
    for (const n of WORK_NAMES[planOp] ?? []) { const w = work.get(n); if (w) return w; }
    return undefined;
  }

  /** The profile's prediction for a plan op on a compute lane at this step's shape, with its correction key. */
  private predict(t: PlanOpTime, work: Map<string, OpWork>, attention: OpWork[][], rows: number, outRows: number, beside: boolean): { key: string; ms: number } | undefined {
    const device = t.lane === 'device' ? 'gpu' : 'cpu';
    const lane = t.lane === 'device' ? 'device' : beside ? 'cpu beside device' : 'cpu';
    const contended = device === 'cpu' && beside;
    if (t.planOp === 'Attention') {
      const all = attention.flat();
      const first = all.find((w) => w.name === 'Scores');
      if (!first) return undefined;
      // The fused kernel over every sequence of the step: sized by all of their attention bytes.
      const groupBytes = attention.reduce((n, ws) => n + (ws[0]?.groupBytes ?? 0), 0);
      return { key: correctionKey(lane, { ...first, groupBytes }, rows), ms: all.reduce((s, w) => s + this.cost.opMs(w, device, contended), 0) };
    }
    const w = this.workOf(t.planOp, work, outRows);
    if (!w) return undefined;
    return { key: correctionKey(lane, w, t.planOp === 'LM head' ? outRows : rows), ms: this.cost.opMs(w, device, contended) };
  }
}
