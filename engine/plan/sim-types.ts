// Simulator vocabulary: tasks on lanes with dependencies; the result with per-lane totals and the
// events of a timeline (exported as Chrome trace-event JSON, which Perfetto opens).

import type { Lane, LaneTimes } from './types';

export interface SimTask {
  id: number;
  lane: Lane;
  /** Shown on the timeline, e.g. 'L3 Q' or 'L3 W:FC.0'. */
  name: string;
  durationMs: number;
  /** Task ids that must finish first. Tasks on one lane also run in id order (FIFO). */
  deps: number[];
  /** Extra wait after the deps finish, off every lane (activation hand-off latency across devices). */
  delayMs?: number;
  stage: 'prefill' | 'decode';
  layer?: number;
  op?: string;
  subBatch?: number;
  /** Free-form category for colouring (compute, weights, kv, activation, recompute). */
  category?: string;
}

export interface SimEvent {
  task: number;
  lane: Lane;
  name: string;
  startMs: number;
  endMs: number;
  stage: 'prefill' | 'decode';
  layer?: number;
  op?: string;
  subBatch?: number;
  category?: string;
}

export interface SimResult {
  /** Makespan of the task graph, ms. */
  totalMs: number;
  /** Busy time per lane, ms. */
  busy: LaneTimes;
  /** busy / totalMs per lane. */
  utilization: LaneTimes;
  /** The lane busiest relative to the makespan. */
  bottleneck: Lane;
  events: SimEvent[];
}

/** Offline simulation of a whole workload: one prefill step + gen decode steps. */
export interface WorkloadSimResult {
  prefillMs: number;
  /** Simulated decode step (one step at the planned context), ms. */
  decodeStepMs: number;
  /** Span of the decoder layers in the decode step (LM head excluded) / nLayers. */
  layerMs: number;
  totalMs: number;
  tokensPerSecond: number;
  prefill: SimResult;
  decode: SimResult;
}

/** One Chrome trace event (phase 'X' complete events; 'M' metadata names lanes; 'i' instants, e.g. a re-plan). */
export interface TraceEvent {
  name: string;
  cat?: string;
  /** Complete, metadata, instant, counter. */
  ph: 'X' | 'M' | 'i' | 'C';
  /** Scope of an instant event: 'g' draws it across every process and lane. */
  s?: 'g' | 'p' | 't';
  /** Microseconds. */
  ts: number;
  dur?: number;
  pid: number;
  tid: number;
  args?: Record<string, unknown>;
}

/** Online (serving) simulation: requests arrive at `rate`; NEO/APEX-style policies provide it. */
export interface OnlineSimResult {
  /** Requests per second offered. */
  rate: number;
  /** Requests simulated. */
  requests: number;
  /** Generated tokens per second over the run. */
  throughputTokensPerS: number;
  /** Mean over requests of (request latency / output tokens), ms. */
  perTokenLatencyMs: number;
  /** Mean iteration (one scheduler step) time, ms. */
  meanIterationMs: number;
  /** Policy-specific extras (e.g. AP/AO choice counts, swap counts). */
  extra?: Record<string, unknown>;
}
