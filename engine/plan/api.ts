// The planner's request API, shared by the CLI (`fulcrum plan|explain|simulate`) and the LSP
// server (fulcrum/plan, fulcrum/explain, fulcrum/simulate): the same options in JSON form, the
// same JSON results.

import { existsSync, readFileSync, statSync } from 'node:fs';
import { parseCostsJson, readCostsFile } from '../cost/costs-file';
import { checkCorrection, type CostCorrection } from '../cost/feedback';
import { readFeedback } from '../cost/feedback-store';
import { withExpertStats, withGgufExperts } from '../cost/moe';
import type { LayerCostTable, Workload } from '../cost/types';
import { whatIfs } from './what-if';
import { neoGainDecision } from './neo-gain';
import { hardwarePreset, withGpuPreset } from '../hardware/presets';
import { loadThisProfile } from '../hardware/this';
import type { HardwareProfile } from '../hardware/types';
import { validateProfile } from '../hardware/validate';
import { readGguf } from '../model/gguf/reader';
import { modelPreset } from '../model/model-presets';
import { shapeFromGguf, validateShape, type ModelShape } from '../model/shape';
import { simulatePlan } from './sim/simulate';
import { toChromeTrace } from './sim/trace';
import type { OnlineSimResult, SimResult, TraceEvent, WorkloadSimResult } from './sim-types';
import { makeContext } from './context';
import type { PlanContext, Policy } from './policy';
import { getPolicy } from './registry';
import type { Plan } from './types';
import { refuseIfNotFitting, withSimulatedPrediction } from './predict';
import { kvFormatConflict } from './kv-format';

export interface PlanParams {
  /** A GGUF path, a model preset ('llama-3.1-8b[:Q4_K]'), or a ModelShape object. */
  model: string | ModelShape;
  /** 'this' (cached measured profile), a hardware preset, a profile JSON path, or a profile object. */
  hardware: string | HardwareProfile;
  /** 'batch=1,prompt=512,gen=64[,batches=N][,vram=8G][,rate=2[,requests=N]]' or the object. */
  workload: string | Workload;
  /** Policy name or 'auto' (default). */
  policy?: string;
  /** A measured per-op cost table (path or object in the --costs format). */
  costs?: string | { unit: 'ms'; ops: unknown[] };
  /** MoE models: expert activation counts from a profiling run (engine/cost/moe.ts format). */
  expertStats?: string;
  /**
   * A measured correction of the profile's costs (engine/cost/feedback.ts). With hardware 'this'
   * and none given, the one the runtime persisted beside this machine's profile applies.
   */
  correction?: CostCorrection;
}

export interface SimulateParams extends PlanParams {
  /** Include the Chrome trace-event JSON in the result. */
  trace?: boolean;
}

export interface SimSummary { totalMs: number; busy: SimResult['busy']; utilization: SimResult['utilization']; bottleneck: SimResult['bottleneck'] }

export interface SimulateResult {
  plan: Plan;
  simulation: {
    prefillMs: number; decodeStepMs: number; layerMs: number; totalMs: number; tokensPerSecond: number;
    prefill: SimSummary; decode: SimSummary;
    /** Online workloads (rate given) for policies that model serving (NEO/APEX). */
    online?: OnlineSimResult;
  };
  trace?: { traceEvents: TraceEvent[]; displayTimeUnit: 'ms'; otherData: Record<string, unknown> };
}

const SIZE_UNITS: Record<string, number> = { '': 1, B: 1, K: 2 ** 10, KB: 2 ** 10, KIB: 2 ** 10, M: 2 ** 20, MB: 2 ** 20, MIB: 2 ** 20, G: 2 ** 30, GB: 2 ** 30, GIB: 2 ** 30, T: 2 ** 40, TB: 2 ** 40, TIB: 2 ** 40 };

/** Bytes from '8G', '8GiB', '12000M', '8589934592'. Decision: K/M/G/T are binary (GiB), like VRAM sizes are sold. */
export function parseBytes(text: string, field: string): number {
  const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = m ? SIZE_UNITS[m[2]!.toUpperCase()] : undefined;
  if (!m || unit === undefined) throw new Error(`workload: ${field} '${text}' is not a size (e.g. 8G, 6144M, 8589934592)`);
  return Math.round(Number(m[1]) * unit);
}

export function parseWorkload(text: string): Workload {
  const w: Partial<Workload> = {};
  const seen = new Set<string>();
  for (const part of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new Error(`workload: '${part}' is not key=value (keys: batch, batches, prompt, gen, vram, rate, requests)`);
    const key = part.slice(0, eq).trim().toLowerCase();
    const value = part.slice(eq + 1).trim();
    if (seen.has(key)) throw new Error(`workload: '${key}' given twice`);
    seen.add(key);
    const int = (): number => {
      const v = Number(value);
      if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(v)) throw new Error(`workload: ${key} must be a non-negative integer, got '${value}'`);
      return v;
    };
    switch (key) {
      case 'batch': w.batch = int(); break;
      case 'prompt': w.prompt = int(); break;
      case 'gen': w.gen = int(); break;
      case 'vram': w.vramBytes = parseBytes(value, 'vram'); break;
      case 'batches': w.batches = int(); break;
      case 'requests': w.requests = int(); break;
      case 'rate': {
        const v = Number(value);
        if (!Number.isFinite(v)) throw new Error(`workload: rate must be a number (requests/s), got '${value}'`);
        w.rate = v;
        break;
      }
      default: throw new Error(`workload: unknown key '${key}' (keys: batch, batches, prompt, gen, vram, rate, requests)`);
    }
  }
  // Decision: defaults for a code-completion request: batch 1, prompt 1024, gen 64.
  return {
    batch: w.batch ?? 1, prompt: w.prompt ?? 1024, gen: w.gen ?? 64,
    ...(w.vramBytes !== undefined ? { vramBytes: w.vramBytes } : {}), ...(w.rate !== undefined ? { rate: w.rate } : {}),
    ...(w.batches !== undefined ? { batches: w.batches } : {}), ...(w.requests !== undefined ? { requests: w.requests } : {}),
  };
}

export function resolveModel(spec: string | ModelShape): ModelShape {
  if (typeof spec !== 'string') { validateShape(spec); return spec; }
  if (spec.toLowerCase().endsWith('.gguf') || (existsSync(spec) && statSync(spec).isFile())) {
    if (!existsSync(spec)) throw new Error(`--model ${spec}: file not found`);
    const file = readGguf(spec);
    return withGgufExperts(shapeFromGguf(file), file);
  }
  return modelPreset(spec);
}

export function resolveHardware(spec: string | HardwareProfile): HardwareProfile {
  if (typeof spec !== 'string') return validateProfile(spec);
  if (spec === 'this') return loadThisProfile();
  // 'this+GPU': this machine's measured CPU and memory with a GPU preset (what-if planning).
  const thisPlus = /^this\+(.+)$/i.exec(spec.trim());
  if (thisPlus) return withGpuPreset(loadThisProfile(), thisPlus[1]!);
  if (spec.toLowerCase().endsWith('.json') || (existsSync(spec) && statSync(spec).isFile())) {
    let raw: unknown;
    try { raw = JSON.parse(readFileSync(spec, 'utf8')); } catch (e) { throw new Error(`--hardware ${spec}: ${(e as Error).message}`); }
    return validateProfile(raw, spec);
  }
  return hardwarePreset(spec);
}

function resolveCosts(c: PlanParams['costs']): LayerCostTable | undefined {
  if (c === undefined) return undefined;
  if (typeof c === 'string') return readCostsFile(c);
  return parseCostsJson(JSON.stringify(c), 'costs');
}

export interface Resolved { ctx: PlanContext; policy: Policy }

export function resolve(params: PlanParams): Resolved {
  if (!params || typeof params !== 'object') throw new Error('plan request: params must be an object with model, hardware, workload');
  if (params.model === undefined) throw new Error('plan request: model is required (GGUF path or preset)');
  if (params.hardware === undefined) throw new Error('plan request: hardware is required (this, a preset, or a profile file)');
  const model = params.expertStats ? withExpertStats(resolveModel(params.model), params.expertStats) : resolveModel(params.model);
  const hardware = resolveHardware(params.hardware);
  const workload = typeof params.workload === 'string' ? parseWorkload(params.workload) : params.workload ?? parseWorkload('');
  const ctx = makeContext(model, hardware, workload, resolveCosts(params.costs), resolveCorrection(params, hardware));
  const policy = getPolicy(params.policy ?? 'auto');
  return { ctx, policy };
}

/** The correction a plan applies: the one given, or with 'this' the persisted one (when it belongs to this profile). */
function resolveCorrection(params: PlanParams, hardware: HardwareProfile): CostCorrection | undefined {
  if (params.correction !== undefined) return checkCorrection(params.correction, 'plan request: correction');
  if (params.hardware !== 'this') return undefined;
  const found = readFeedback(hardware);
  return found.status === 'hit' ? found.correction.snapshot() : undefined;
}

/**
 * The plan of the resolved policy with the simulator's figures (engine/plan/predict.ts), refused
 * when it does not fit in memory — the same for every policy and for auto.
 */
function planWith({ ctx, policy }: Resolved): { plan: Plan; sim: WorkloadSimResult; executed: Policy } {
  const a = policy.applicable(ctx);
  if (!a.ok) throw new Error(`policy ${policy.name} does not apply: ${a.reason}`);
  const raw = policy.plan(ctx);
  const conflict = kvFormatConflict(raw, ctx);
  if (conflict) throw new Error(`policy ${raw.chosenPolicy} cannot run here: ${conflict}; use policy lia or auto (attention on the CPU), or kvFormat F16`);
  const executed = policy.name === 'auto' ? getPolicy(raw.chosenPolicy) : policy;
  let plan: Plan;
  let sim: WorkloadSimResult;
  if (policy.name === 'auto') {
    // auto's plan already carries the simulated figures of the chosen policy's plan.
    plan = raw;
    sim = simulatePlan(plan, ctx, executed);
  } else {
    ({ plan, sim } = withSimulatedPrediction(raw, ctx, policy));
  }
  refuseIfNotFitting(plan, ctx);
  return { plan, sim, executed };
}

export function planRequest(params: PlanParams): Plan {
  return planWith(resolve(params)).plan;
}

/** The plan with what-if suggestions filled in (plan requests leave them empty: they cost ~6 re-plans). */
export function explainRequest(params: PlanParams): Plan {
  const r = resolve(params);
  const { plan } = planWith(r);
  // Decision: a measured --costs table describes one fixed configuration; re-planning a change
  // would mix measured and modelled costs, so what-ifs are left out and the summary says so.
  if (r.ctx.cost.measured) plan.explanation.summary += ' (No what-ifs: they need the cost model, and this plan uses a measured --costs table.)';
  else plan.explanation.whatIf = whatIfs(r.policy, plan, r.ctx.model, r.ctx.hardware, r.ctx.workload, r.ctx.cost.correction);
  const gain = neoGainDecision(plan, r.ctx);
  if (gain) plan.explanation.decisions.push(gain);
  return plan;
}

export function simulateRequest(params: SimulateParams): SimulateResult {
  const r = resolve(params);
  const { plan, sim, executed } = planWith(r);
  const summary = (s: SimResult): SimSummary => ({ totalMs: s.totalMs, busy: s.busy, utilization: s.utilization, bottleneck: s.bottleneck });
  const result: SimulateResult = {
    plan,
    simulation: {
      prefillMs: sim.prefillMs, decodeStepMs: sim.decodeStepMs, layerMs: sim.layerMs, totalMs: sim.totalMs, tokensPerSecond: sim.tokensPerSecond,
      prefill: summary(sim.prefill), decode: summary(sim.decode),
    },
  };
  if (r.ctx.workload.rate !== undefined && executed.simulateOnline) result.simulation.online = executed.simulateOnline(plan, r.ctx);
  if (params.trace) {
    result.trace = toChromeTrace([
      { name: `prefill (${plan.chosenPolicy})`, result: sim.prefill },
      { name: `decode step (${plan.chosenPolicy})`, result: sim.decode },
    ], { policy: plan.chosenPolicy, model: plan.model.name, hardware: plan.hardware.name, workload: plan.workload });
  }
  return result;
}
