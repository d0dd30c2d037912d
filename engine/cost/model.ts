// The CostModel policies plan from: op work from engine/cost/ops.ts, device times from
// engine/cost/device.ts, or — for the decode stage — a measured --costs table. A measured
// correction (engine/cost/feedback.ts: what executed steps measured against this profile)
// multiplies the profile's times by the factor of their op class.

import type { HardwareProfile } from '../hardware/types';
import { profileNoise } from '../hardware/validate';
import { formatBytesPerElement, layerWeightBytes, type ModelShape } from '../model/shape';
import { cpuOpMs, gpuOpMs, s2dMs, transferMs } from './device';
import { copyFactorOf, correctionFactorOf, correctionSourceText, type CostCorrection } from './feedback';
import { headWork, layerWork } from './ops';
import type { LayerCostTable, OpTimes, OpWork, StageCosts, StepShape } from './types';

/** The cost model the planner's policies price their decisions with; ProfileCostModel below is it. */
export interface CostModel {
  readonly model: ModelShape;
  readonly hardware: HardwareProfile;
  /** Work (FLOPs, bytes) of every op of one decoder layer for a step shape. */
  layerWork(step: StepShape): OpWork[];
  /** Times of every op of one layer on each lane (modelled, or measured for decode with --costs). */
  layerTimes(step: StepShape, stage: 'prefill' | 'decode'): LayerCostTable;
  /** Work + times + LM head + byte totals for a stage's step. */
  stage(stage: 'prefill' | 'decode', step: StepShape): StageCosts;
  /** Time of one op's work on one device; `contended`: while an h2d transfer runs (paper 000). */
  opMs(work: OpWork, device: 'cpu' | 'gpu', contended?: boolean): number;
  /**
   * Time to move `bytes` over the link. `pinned` false = pageable. `rows`: the rows of the step
   * the copy runs in (the measured correction's bucket; default 1, a decode step's).
   */
  transferMs(bytes: number, direction: 'h2d' | 'd2h', pinned?: boolean, rows?: number): number;
  /** LM head (+ final norm) times for `tokens` rows. */
  headTimes(tokens: number): OpTimes;
  /** True when decode costs come from a measured --costs table, not the model. */
  readonly measured: boolean;
  /** The modelled costs' source as plans report it ('model', or with a measured correction). */
  readonly source?: string;
  /** The measured correction applied to the profile's times (engine/cost/feedback.ts), if any. */
  readonly correction?: CostCorrection;
}

export class ProfileCostModel implements CostModel {
  readonly measured: boolean;
  private readonly cache = new Map<string, LayerCostTable>();
  private readonly workCache = new Map<string, OpWork[]>();

  constructor(readonly model: ModelShape, readonly hardware: HardwareProfile, private readonly measuredDecode?: LayerCostTable, readonly correction?: CostCorrection) {
    this.measured = measuredDecode !== undefined;
  }

  /**
   * Where the times come from, as plans report it: 'model', or the profile with its measured
   * correction; a profile whose probes disagreed is named as such.
   */
  get source(): string {
    const base = correctionSourceText(this.correction) ?? 'model';
    const noise = profileNoise(this.hardware);
    return noise ? `${base} (the profile's probes disagreed: ${noise})` : base;
  }

  /** The measured correction's factor for a time of `work` on `lane` (1 without one). */
  private corrected(lane: 'cpu' | 'cpu beside device' | 'device', work: OpWork, ms: number): number {
    if (!this.correction) return ms;
    return ms * correctionFactorOf(this.correction, lane, work, work.rows ?? 1);
  }

  layerWork(step: StepShape): OpWork[] {
    const key = `${step.batch}/${step.newTokens}/${step.context}`;
    let w = this.workCache.get(key);
    if (!w) { w = layerWork(this.model, step); this.workCache.set(key, w); }
    return w;
  }

  opMs(work: OpWork, device: 'cpu' | 'gpu', contended = false): number {
    if (device === 'gpu') {
      if (!this.hardware.gpu) return Infinity;
      return this.corrected('device', work, gpuOpMs(this.hardware.gpu, work));
    }
    const kvLen = work.kvReadBytes > 0 ? this.kvLengthOf(work) : 0;
    const t = cpuOpMs(this.hardware.cpu, work, kvLen);
    return contended ? this.corrected('cpu beside device', work, t * this.hardware.cpu.contentionFactor) : this.corrected('cpu', work, t);
  }

  private kvLengthOf(work: OpWork): number {
    const perToken = this.model.nKvHeads * this.model.headDim * formatBytesPerElement(this.model.kvFormat);
    return work.kvReadBytes / perToken;
  }

  /**
   * Decision: a transfer named without its step's rows (KV swaps between steps, a planner's own
   * estimate) is corrected at the decode rate, serving's steady state.
   */
  transferMs(bytes: number, direction: 'h2d' | 'd2h', pinned = true, rows = 1): number {
    return transferMs(this.hardware, bytes, direction, pinned) * copyFactorOf(this.correction, direction, rows);
  }

  /** Modelled op times; the `cpu` field is contended only when there is a GPU link to contend with. */
  private timesOf(w: OpWork): OpTimes {
    const solo = this.opMs(w, 'cpu', false);
    const t: OpTimes = { name: w.name, kind: w.kind, cpuSolo: solo };
    if (this.hardware.gpu) {
      t.cpu = this.opMs(w, 'cpu', true);
      t.gpu = this.opMs(w, 'gpu');
      const h2dBytes = w.weightBytes + w.kvReadBytes;
      t.h2d = this.transferMs(h2dBytes, 'h2d', true, w.rows);
      if (w.kvReadBytes > 0) t.h2dKv = this.transferMs(w.kvReadBytes, 'h2d', true, w.rows);
      if (w.kvWriteBytes > 0) t.d2h = this.transferMs(w.kvWriteBytes, 'd2h', true, w.rows);
      const s = s2dMs(this.hardware, w.weightBytes);
      if (s !== undefined) t.s2d = s;
    } else {
      t.cpu = solo;
    }
    return t;
  }

  layerTimes(step: StepShape, stage: 'prefill' | 'decode'): LayerCostTable {
    if (stage === 'decode' && this.measuredDecode) return this.measuredDecode;
    const key = `${stage}:${step.batch}/${step.newTokens}/${step.context}`;
    let t = this.cache.get(key);
    if (!t) {
      const work = this.layerWork(step);
      t = { unit: 'ms', ops: work.map((w) => this.timesOf(w)), source: this.source };
      this.cache.set(key, t);
    }
    return t;
  }

  headTimes(rows: number): OpTimes {
    return this.timesOf(headWork(this.model, rows));
  }

  stage(stage: 'prefill' | 'decode', step: StepShape): StageCosts {
    const work = this.layerWork(step);
    const kvBytes = step.batch * (step.context + step.newTokens) * 2 * this.model.nKvHeads * this.model.headDim * formatBytesPerElement(this.model.kvFormat);
    return {
      stage, step, work,
      table: this.layerTimes(step, stage),
      head: this.headTimes(stage === 'prefill' ? step.batch : step.batch * step.newTokens),
      layerWeightBytes: layerWeightBytes(this.model),
      layerKvBytes: kvBytes,
    };
  }
}
