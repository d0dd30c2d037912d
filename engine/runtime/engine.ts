// The runtime's front door: loads a GGUF model onto the native CPU executor and generates text.
// One generation at a time per engine (calls queue); the KV cache keeps the tokens of the last
// call so a prompt that extends it (editor keystrokes) only evaluates its new tokens.
import { metaOptionalString, readGguf } from '../model/gguf';
import type { GgufFile } from '../model/gguf';
import { describeNonFinite, findNonFiniteTensors } from '../model/gguf/check';
import { GgmlType } from '../model/ggml-types';
import { readHparams, type ModelHparams } from '../model/hparams';
import { layerSummaries, summarizeModel } from '../model/summary';
import { createTokenizer, type Tokenizer } from '../model/tokenizer';
import { nativeOpTable } from '../native/op-table';
import { createNativeModel, type NativeDeviceStats, type NativeModel, type NativeOpTiming } from '../native/model';
import { defaultThreads, EngineError, nativeConfig, PREFILL_BATCH } from './native-config';
import { Sampler } from './sampler';
import { StopStringFilter } from './stop-strings';
import { KV_FORMATS, type ExecutionInfo, type GenerateOptions, type GenerateResult, type LayerSummary, type LoadOptions, type ModelSummary, type StopReason } from './types';
import { planExecution } from './execution';
import { inlineBudgetError, withInlineSteps, type InlineSteps } from './inline-steps';
import { withOverrides } from './model-overrides';
import { BatchReplanned, grownBatch, grownWorkload, isMemoryRefusal, monotonicNs, replanFor, type ReplanEvent } from './replan';
import { parseWorkload } from '../plan/api';
import type { Workload } from '../cost/types';
import { runsOnByLayer, sequenceKvAssignment, type RunsOn } from './lowering';
import type { NativeDevice, NativePlacement } from '../native/model';
import { measuredTrace, type MeasuredTrace, type RawMark } from './trace';
import { Scheduler, type SchedulerOptions } from './scheduler/scheduler';
import type { IterationRecord, LiveDecider } from './scheduler/online';
import { isDeciderKind, liveDecider, type LiveDeciderOptions } from './scheduler/live-setup';

export interface EngineSchedulerOptions extends SchedulerOptions {
  /**
   * The online decider of a NEO/APEX plan (default: on, the plan's own policy): `kind` runs
   * another (NEO's baselines 'gpu-only' and 'offload-all' on the same placement), `off` runs the
   * placement's fixed KV assignment without per-iteration decisions.
   */
  online?: LiveDeciderOptions & { off?: boolean };
}
import { StepFeedback, type SequenceStep } from './feedback';
import { PROMPT_CHUNK, PromptSpeed, SOLO_PROMPT_MS } from './prompt-steps';
import { formatBytesPerElement, shapeFromGguf } from '../model/shape';
import { cpuForThreads } from './devices';
import type { NativeCompiledOp } from '../native/model';

// Where the native configuration, the thread default and the prefill batch live (the benchmark and
// the profiler's calibration need them without the whole engine).
export { defaultThreads, EngineError, nativeConfig, PREFILL_BATCH } from './native-config';
const DEFAULT_CONTEXT_CAP = 4096;
/**
 * KV positions of sequence 0 committed at load (LoadOptions.prepareKvPositions): a completion
 * with the default prompt budget (1024, completion/budget.ts) and the 64 tokens it generates by
 * default (completer.ts). Spelled out: the runtime does not import the completion room, which
 * stands on it; kv-cache.test.ts holds the two to this sum.
 */
export const FIRST_REQUEST_KV_POSITIONS = 1024 + 64;
/** Numbers of traced events kept for a tracing caller while feedback takes the native trace (native/src/model/model.h's limit). */
const RETAINED_TRACE_LIMIT = 4 << 20;
/** Most live-decider iterations kept for one takeTrace() (a long untaken trace must not grow without bound). */
const RETAINED_MARK_LIMIT = 100_000;

/** Float tensors up to this size are checked for non-finite values at load. */
const LOAD_CHECK_MAX_TENSOR_BYTES = 32 << 20;

/** The addon marks errors of a device that refused memory or was lost (the CPU can take over). */
function isDeviceError(e: unknown): boolean {
  return (e as { deviceError?: boolean } | null)?.deviceError === true;
}

export class Engine {
  readonly summary: ModelSummary;
  readonly tokenizer: Tokenizer;
  readonly hparams: ModelHparams;
  private readonly file: GgufFile;
  private native: NativeModel | undefined;
  /** Tokens whose keys/values are in the KV cache, in order from position 0. */
  private kvTokens: number[] = [];
  private queue: Promise<unknown> = Promise.resolve();
  /** What executes (device, policy, split), kept current across a fallback to the CPU. */
  execution: ExecutionInfo;
  private readonly onFallback: ((reason: string) => void) | undefined;
  private readonly onReplan: LoadOptions['onReplan'];
  /** The device the plan executes on (kept to re-plan onto it). */
  private device: NativeDevice | null = null;
  /** The placement the model executes (null: everything on the CPU), for `runsOn`. */
  private placement: NativePlacement | null = null;
  private maxSequences = 1;
  /** How the user sets the context on the surface that loaded this engine (named in errors). */
  private readonly contextFlag: string;
  /** Which short steps run on the JS thread: the budget (settable) and the counts of each choice. */
  readonly inlineSteps: InlineSteps;

  private constructor(file: GgufFile, hp: ModelHparams, tokenizer: Tokenizer, native: NativeModel & { inlineSteps: InlineSteps }, contextLength: number, execution: ExecutionInfo, onFallback?: (reason: string) => void, contextOption = '--ctx', onReplan?: LoadOptions['onReplan']) {
    this.contextFlag = contextOption;
    this.file = file;
    this.hparams = hp;
    this.tokenizer = tokenizer;
    this.native = native;
    this.inlineSteps = native.inlineSteps;
    this.summary = summarizeModel(file, { contextLength, hparams: hp, kvFormat: native.kvFormat });
    this.execution = execution;
    this.onFallback = onFallback;
    this.onReplan = onReplan;
  }

  static async load(path: string, opts: LoadOptions = {}): Promise<Engine> {
    const progress = opts.onProgress ?? (() => {});
    progress(0, 'reading GGUF header');
    const file = readGguf(path);
    const hp = readHparams(file);
    progress(0.2, 'building tokenizer');
    const tokenizer = createTokenizer(file);
    const contextLength = opts.contextLength ?? Math.min(hp.contextLength, DEFAULT_CONTEXT_CAP);
    if (!Number.isInteger(contextLength) || contextLength < 1) {
      throw new EngineError(`contextLength must be a positive integer, got ${contextLength}`);
    }
    const threads = opts.threads ?? defaultThreads();
    if (!Number.isInteger(threads) || threads < 1 || threads > 512) throw new EngineError(`threads must be an integer in [1, 512], got ${threads}`);
    const prepareKvPositions = Math.min(contextLength, opts.prepareKvPositions ?? FIRST_REQUEST_KV_POSITIONS);
    if (!Number.isInteger(prepareKvPositions) || prepareKvPositions < 0) throw new EngineError(`prepareKvPositions must be a non-negative integer, got ${opts.prepareKvPositions}`);
    // Cheap part of the weight check (engine/model/gguf/check.ts): float tensors up to 32 MiB each
    // (norms, biases, small embeddings); `fulcrum inspect --check` reads every tensor.
    const damaged = findNonFiniteTensors(file, { tensors: file.tensors.filter((t) => t.type === GgmlType.F32 || t.type === GgmlType.F16 || t.type === GgmlType.BF16), maxBytes: LOAD_CHECK_MAX_TENSOR_BYTES });
    if (damaged.length) throw new EngineError(`the model's weights hold non-finite numbers (NaN or Inf), so it cannot give meaningful output:\n${describeNonFinite(path, damaged)}`);
    progress(0.4, 'mapping weights');
    const kvFormat = opts.kvFormat ?? 'F16';
    if (!(KV_FORMATS as readonly string[]).includes(kvFormat)) throw new EngineError(`kvFormat must be one of ${KV_FORMATS.join(', ')}, got '${String(kvFormat)}'`);
    const config = { ...nativeConfig(file, hp, contextLength, threads), ...(opts.maxSequences !== undefined ? { maxSequences: opts.maxSequences } : {}), ...(kvFormat !== 'F16' ? { kvFormat } : {}) };
    const tensors = file.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset }));
    const badBudget = inlineBudgetError(opts.inlineStepBudgetMs);
    if (badBudget) throw new EngineError(`inlineStepBudgetMs: ${badBudget}`);
    const native = withInlineSteps(createNativeModel(path, tensors, config), opts.inlineStepBudgetMs);
    let execution: ExecutionInfo;
    let deviceOf: NativeDevice | null = null;
    let bySequence = 0;
    let executed: NativePlacement | null = null;
    try {
      progress(0.7, 'planning the split');
      const correction = opts.correction ?? (opts.feedback ? opts.feedback.correction?.snapshot() : undefined);
      const setup = await planExecution(file, hp, contextLength, config.batchSize ?? PREFILL_BATCH, { ...opts, ...(correction ? { correction } : {}) }, opts.maxSequences ?? 1, threads);
      execution = setup.info;
      deviceOf = setup.device;
      if (setup.placement) {
        try {
          native.setPlacement(setup.placement, setup.device, setup.prefill);
          setup.sequenceKv.forEach((loc, seq) => native.setSequenceKv(seq, loc));
          bySequence = setup.placement.layers.filter((l) => l.kvBySequence).length;
          executed = setup.placement;
          // What the device changed in the plan (e.g. a weight format it has no kernel for runs on the CPU).
          const changed = native.placementNotes();
          if (changed.length) execution = { ...execution, notes: [...execution.notes, ...changed] };
        } catch (e) {
          if (!isDeviceError(e)) throw e;
          // The device refused the plan's memory: run on the CPU, and say why.
          execution = { ...execution, fallback: (e as Error).message, split: 'CPU only (device refused)' };
          opts.onFallback?.((e as Error).message);
        }
      }
    } catch (e) {
      native.dispose();
      throw e;
    }
    // The first request's KV memory is committed now, not inside its latency (Model::prepare_kv
    // has the measurement): sequence 0 is the slot a first request takes (scheduler.ts).
    native.prepareKv(prepareKvPositions, 0);
    if (contextLength > hp.contextLength) {
      // Allowed (RoPE extrapolates somewhat), but past its training length a model's output degrades: say so, as llama.cpp does.
      execution = { ...execution, notes: [`context ${contextLength} is longer than the ${hp.contextLength} positions the model was trained with; expect degraded output past ${hp.contextLength}`, ...execution.notes] };
    }
    progress(1, 'ready');
    const engine = new Engine(file, hp, tokenizer, native, contextLength, execution, opts.onFallback, opts.contextOption, opts.onReplan);
    engine.device = execution.fallback === undefined ? deviceOf : null;
    engine.bySequence = execution.fallback === undefined ? bySequence : 0;
    engine.placement = execution.fallback === undefined ? executed : null;
    engine.maxSequences = opts.maxSequences ?? 1;
    engine.attachFeedback(opts, threads);
    return engine;
  }

  /**
   * Measured feedback: the profile to predict with is the executed plan's (its device and this
   * engine's threads), else the one the caller gave; without one there is nothing to compare with.
   */
  private attachFeedback(opts: LoadOptions, threads: number): void {
    if (opts.feedback === false) return;
    const planned = this.execution.planParams?.hardware;
    const given = opts.feedback?.profile ?? (typeof opts.hardware === 'object' ? opts.hardware : undefined);
    const hardware = this.execution.device !== 'cpu' && typeof planned === 'object' ? planned
      : given ? { ...given, cpu: cpuForThreads(given.cpu, threads) } : undefined;
    if (!hardware) return;
    this.feedback = new StepFeedback({ ...shapeFromGguf(this.file), kvFormat: this.model().kvFormat }, hardware, opts.feedback || {});
  }

  /** The running measured correction of this engine's profile (undefined when feedback is off). */
  get measuredFeedback(): StepFeedback | undefined {
    return this.feedback;
  }
  private feedback: StepFeedback | undefined;
  /** Whether a caller asked for traces (setTracing); feedback traces every step regardless. */
  private userTracing = false;
  /** Traces taken for feedback while a caller traces too, kept for its takeTrace(). */
  private retained: { raw: Float64Array; ops: NativeCompiledOp[] }[] = [];
  /** Re-plans after this time (ns, the trace's clock) belong to the next takeTrace(). */
  private marksSinceNs = 0;
  /** The live decider's iterations while a caller traces, for the next takeTrace(). */
  private iterationMarks: RawMark[] = [];
  private ops: NativeCompiledOp[] | undefined;

  /** Before a native evaluation: per-op timing on when a caller traces or feedback samples this one. */
  private beforeEval(): boolean {
    this.feedback!.evaluating();
    const sampled = this.feedback!.nextIsSampled();
    const on = sampled || this.userTracing;
    if (this.native && this.native.tracing !== on) this.native.tracing = on;
    return sampled;
  }

  /** After a native evaluation: a sampled one's trace goes to feedback; a tracing caller keeps every one. */
  private afterEval(sampled: boolean, seqs: SequenceStep[], outRows: number): void {
    if (!this.feedback || !this.native || (!sampled && !this.userTracing)) return;
    const raw = this.native.takeTrace();
    // Kept for the caller up to the native trace's own limit (2^20 events of 4 numbers).
    this.ops ??= this.native.compiledOps();
    if (this.userTracing && this.retained.reduce((n, r) => n + r.raw.length, 0) + raw.length <= RETAINED_TRACE_LIMIT) this.retained.push({ raw, ops: this.ops });
    if (!sampled) return;
    this.feedback.observe(measuredTrace(this.ops, raw), seqs, outRows);
  }

  /** The native model whose evaluations are observed for feedback. */
  private observed(model: NativeModel): NativeModel {
    if (!this.feedback) return model;
    const evalAsync: NativeModel['evalAsync'] = async (tokens, pos, all, out) => {
      const sampled = this.beforeEval();
      const r = await model.evalAsync(tokens, pos, all, out);
      this.afterEval(sampled, [{ rows: tokens.length, context: pos }], all ? tokens.length : 1);
      return r;
    };
    const evalBatchAsync: NativeModel['evalBatchAsync'] = async (inputs, all, outs) => {
      const sampled = this.beforeEval();
      const r = await model.evalBatchAsync(inputs, all, outs);
      this.afterEval(sampled, inputs.map((i) => ({ rows: i.tokens.length, context: i.startPos })), all ? inputs.reduce((n, i) => n + i.tokens.length, 0) : inputs.length);
      return r;
    };
    return withOverrides(model, { evalAsync, evalBatchAsync });
  }

  /**
   * The continuous-batching scheduler over this model's sequences (created on first use). While
   * it serves, generate() and logits() must not be used on the same engine: both drive the one
   * native model.
   */
  scheduler(opts: EngineSchedulerOptions = {}): Scheduler {
    if (!this.sched) {
      this.sched = new Scheduler(this.batchGuarded(this.observed(this.model())), this.tokenizer, this.contextLength, { ...opts, onStepError: (e) => this.deviceFailed(e) });
      this.onlineOptions = { ...(opts.online ?? {}), stepRows: Math.max(1, opts.stepRows ?? 64) };
      this.sched.setOnline(this.makeLiveDecider());
    }
    return this.sched;
  }
  private onlineOptions: (LiveDeciderOptions & { off?: boolean; stepRows: number }) | undefined;

  /**
   * NEO and APEX decide live (issue 21 item 2): with a plan of theirs whose layers keep the KV by
   * sequence, the scheduler runs their per-iteration decider (engine/plan/online) over the live
   * requests. Undefined for every other plan, on the CPU, or when the caller turned it off.
   */
  private makeLiveDecider(): LiveDecider | undefined {
    const o = this.onlineOptions;
    const params = this.execution.planParams;
    if (!o || o.off || !params || !this.bySequence || this.execution.fallback !== undefined) return undefined;
    if (!isDeciderKind(o.kind ?? this.execution.policy)) return undefined;
    const model = this.model();
    const kvh = this.hparams.nKvHeads, hd = this.hparams.headDim;
    // Each decision goes into the trace (when a caller traces) before the step that executes it.
    const onIteration = (r: IterationRecord): void => {
      if (this.userTracing && this.iterationMarks.length < RETAINED_MARK_LIMIT) {
        this.iterationMarks.push({
          name: `iteration ${r.iteration}: ${r.mode}`, cat: 'online', atNs: monotonicNs(),
          args: { mode: r.mode, deviceAttended: r.deviceAttended, cpuAttended: r.cpuAttended, swappedOut: r.swappedOut.length, swappedIn: r.swappedIn.length, refused: r.refused, admittedDevice: r.admittedDevice, admittedHost: r.admittedHost },
        });
      }
      o.onIteration?.(r);
    };
    return liveDecider(model, params, this.execution.policy, {
      device: model.deviceStats, kvBytesPerToken: this.bySequence * 2 * kvh * hd * formatBytesPerElement(model.kvFormat), pageTokens: model.kvPageTokens,
      maxSequences: this.maxSequences, stepRows: o.stepRows,
    }, { ...o, onIteration });
  }
  /** Layers whose KV lives where each sequence says (NEO/APEX placements); 0 otherwise. */
  private bySequence = 0;

  /**
   * A step failed: when the device did, the model moves to the CPU (every sequence's KV goes with
   * the placement), execution says why, and true is returned so the caller rebuilds its KV.
   */
  private deviceFailed(e: unknown): boolean {
    // A re-plan for a larger batch moved the placement before the step: the KV is rebuilt.
    if (e instanceof BatchReplanned) {
      // The decider's limits (KV pages, batch) were the old plan's: it starts again on the new one.
      this.sched?.setOnline(this.makeLiveDecider());
      return true;
    }
    if (!isDeviceError(e)) return false;
    const reason = (e as Error).message;
    if (this.replan(reason)) {
      // The op list changed with the placement (feedback maps trace events through it).
      this.ops = undefined;
      this.kvTokens.length = 0;
      // Every sequence's KV went with the old placement: the decider starts again on the new one.
      this.sched?.setOnline(this.makeLiveDecider());
      return true;
    }
    this.model().setPlacement(null, null);
    this.placement = null;
    this.bySequence = 0;
    this.sched?.setOnline(undefined);
    this.ops = undefined;
    this.execution = { ...this.execution, fallback: reason, split: 'CPU only (device failed)' };
    this.onFallback?.(reason);
    this.kvTokens.length = 0;
    return true;
  }
  private sched: Scheduler | undefined;

  /**
   * The device refused memory mid-run (a request grew past the KV the plan holds): plan again for
   * the longer context and move to that placement (its KV is then rebuilt by the caller). False
   * when this is not a refusal, nothing larger can be planned, or the device refuses the new plan
   * too: the caller falls back to the CPU.
   */
  private replan(reason: string): boolean {
    const params = this.execution.planParams;
    if (!isMemoryRefusal(reason) || !params || !this.device || this.execution.fallback !== undefined) return false;
    const needed = this.heldPositions();
    const old = typeof params.workload === 'string' ? parseWorkload(params.workload) : params.workload;
    const workload = grownWorkload(old, needed, this.contextLength);
    if (!workload) return false;
    return this.replanTo(workload, reason, 'context', needed) === 'moved';
  }

  /** The most KV positions any sequence holds. */
  private heldPositions(): number {
    const model = this.model();
    return Math.max(this.kvTokens.length, ...Array.from({ length: this.maxSequences }, (_, s) => model.sequencePast(s)));
  }

  /**
   * Plans for `workload` and moves to it. 'no-plan': nothing changed; 'refused': the device refused
   * the new placement (the model's placement is then in no known state: the caller falls back).
   */
  private replanTo(workload: Workload, reason: string, trigger: ReplanEvent['trigger'], atPosition: number): 'moved' | 'no-plan' | 'refused' {
    const params = this.execution.planParams!;
    const model = this.model();
    const next = replanFor(params, workload, this.hparams.nLayers);
    if (!next) return 'no-plan';
    this.keepTraceOfPlacement();
    try {
      if (next.placement === null) {
        // The plan for the longer context keeps everything on the CPU (the device cannot hold its share).
        model.setPlacement(null, null);
        this.placement = null;
        this.device = null;
        this.bySequence = 0;
      } else {
        // Cleared first: if the device refuses the new placement, the caller falls back to the CPU.
        this.placement = null;
        model.setPlacement(next.placement, this.device, next.prefill);
        this.placement = next.placement;
        if (next.placement.layers.some((l) => l.kvBySequence)) sequenceKvAssignment(next.plan, this.maxSequences).forEach((loc, seq) => model.setSequenceKv(seq, loc));
        this.bySequence = next.placement.layers.filter((l) => l.kvBySequence).length;
      }
    } catch (e) {
      if (!isDeviceError(e)) throw e;
      return 'refused';
    }
    const event: ReplanEvent = { trigger, reason, atNs: monotonicNs(), atPosition, fromSplit: this.execution.split, toSplit: next.split, workload };
    this.execution = {
      ...this.execution, policy: next.plan.chosenPolicy, plan: next.plan, split: next.split, planParams: next.params,
      ...(next.placement === null ? { device: 'cpu' as const } : {}),
      notes: [...this.execution.notes.filter((n) => !next.notes.includes(n)), ...next.notes, ...model.placementNotes()],
      replans: [...(this.execution.replans ?? []), event],
    };
    this.onReplan?.(event);
    return 'moved';
  }

  /** The largest step (sequences) a batch re-plan was tried for: each size is tried once. */
  private batchTried = 0;

  /**
   * The scheduler's model: a step of more sequences than the plan's batch re-plans first (the
   * plan was made for fewer; issue 21 item 3) and then throws BatchReplanned, so the scheduler
   * rebuilds every running request's KV under the new placement and runs the step again.
   */
  private batchGuarded(model: NativeModel): NativeModel {
    const evalBatchAsync: NativeModel['evalBatchAsync'] = async (inputs, all, outs) => {
      const event = this.replanForBatch(inputs.length);
      if (event) throw new BatchReplanned(event);
      return model.evalBatchAsync(inputs, all, outs);
    };
    return withOverrides(model, { evalBatchAsync });
  }

  /** Re-plans for a step of `sequences` sequences when the plan assumed fewer; the event when the placement moved. */
  private replanForBatch(sequences: number): ReplanEvent | undefined {
    const params = this.execution.planParams;
    if (!params || !this.device || this.execution.fallback !== undefined || sequences <= this.batchTried) return undefined;
    const old = typeof params.workload === 'string' ? parseWorkload(params.workload) : params.workload;
    const workload = grownBatch(old, sequences, this.maxSequences);
    if (!workload) return undefined;
    this.batchTried = sequences;
    const reason = `a step of ${sequences} sequences is past the plan's batch of ${old.batch}`;
    const fromSplit = this.execution.split;
    const r = this.replanTo(workload, reason, 'batch', this.heldPositions());
    if (r === 'no-plan') return undefined;  // the old placement runs on; nothing moved
    this.ops = undefined;
    this.kvTokens.length = 0;
    if (r === 'refused') {
      // The device refused the larger plan's memory mid-move: the CPU takes over, as after a failure.
      this.model().setPlacement(null, null);
      this.placement = null;
      this.device = null;
      this.execution = { ...this.execution, fallback: reason, split: 'CPU only (device refused the re-plan)' };
      this.onFallback?.(reason);
      return { trigger: 'batch', reason, atNs: monotonicNs(), atPosition: 0, fromSplit, toSplit: 'CPU only', workload };
    }
    return this.execution.replans![this.execution.replans!.length - 1]!;
  }

  /**
   * Before the placement changes: a tracing caller's ops so far are kept with the op list they
   * ran under (the new placement compiles another; takeTrace joins both).
   */
  private keepTraceOfPlacement(): void {
    const m = this.model();
    if (!this.userTracing) return;
    const raw = m.takeTrace();
    if (raw.length) this.retained.push({ raw, ops: m.compiledOps() });
  }

  /** Where each layer runs now (index → 'GPU' | 'CPU' | 'GPU+CPU'; -1: embedding and output), after any fallback or re-plan. */
  runsOn(): Record<number, RunsOn> {
    return runsOnByLayer(this.placement, this.hparams.nLayers);
  }

  /** Switches per-op tracing of executed steps on or off (clears what was recorded). */
  setTracing(on: boolean): void {
    const m = this.model();
    this.userTracing = on;
    this.retained = [];
    this.marksSinceNs = monotonicNs();
    this.iterationMarks = [];
    m.tracing = on;
    if (!on) m.takeTrace();
  }

  /** The ops executed since tracing was switched on (or last taken), with their lanes and times. */
  takeTrace(): MeasuredTrace {
    const m = this.model();
    const earlier = this.retained;
    this.retained = [];
    // Re-plans while tracing appear in the trace as instant events between the steps.
    const since = this.marksSinceNs;
    this.marksSinceNs = monotonicNs();
    const marks = (this.execution.replans ?? []).filter((e) => e.atNs >= since).map((e) => ({
      name: `re-plan (${e.trigger}): ${e.fromSplit} → ${e.toSplit}`, atNs: e.atNs,
      args: { reason: e.reason, trigger: e.trigger, atPosition: e.atPosition, from: e.fromSplit, to: e.toSplit, batch: e.workload.batch, context: e.workload.prompt + e.workload.gen },
    }));
    const iterations = this.iterationMarks;
    this.iterationMarks = [];
    return measuredTrace(m.compiledOps(), m.takeTrace(), [...marks, ...iterations], earlier);
  }

  /** KV cache bytes held by every sequence (host and device pages). */
  kvBytesInUse(): number {
    return this.model().kvBytesInUse;
  }

  /** KV cache bytes committed (held pages, cleared ones kept, and those prepared at load). */
  kvBytesReserved(): number {
    return this.model().kvBytesReserved;
  }

  /** Device memory in use and its peak (null on the CPU). */
  deviceStats(): NativeDeviceStats | null {
    return this.model().deviceStats;
  }

  /** Test hook: the device fails after `n` more operations (the engine then falls back to the CPU). */
  failDeviceAfter(n: number): void {
    this.model().failDeviceAfter(n);
  }

  /**
   * Evaluates `tokens` at `pos`. When the device fails, the model moves to the CPU and the KV
   * cache is rebuilt there from the tokens it held, so the request goes on where it was.
   */
  private evalTokens(tokens: number[], pos: number, out?: Float32Array): Promise<Float32Array> {
    return this.withFallback(this.observed(this.model())).evalAsync(Int32Array.from(tokens), pos, false, out);
  }


  layers(): LayerSummary[] {
    return layerSummaries(this.file);
  }

  get threads(): number {
    return this.model().threads;
  }

  /** The GGUF's Jinja chat template (tokenizer.chat_template), if it has one. */
  get chatTemplate(): string | undefined {
    return metaOptionalString(this.file, 'tokenizer.chat_template');
  }

  get contextLength(): number {
    return this.summary.contextLength;
  }

  /** Runs after every earlier call has finished (one generation at a time). */
  generate(prompt: string, opts: GenerateOptions): Promise<GenerateResult> {
    const run = this.queue.then(() => this.generateNow(prompt, opts));
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Logits for `tokens` evaluated from position 0 (the KV cache is reused where it matches). */
  async logits(tokens: number[]): Promise<Float32Array> {
    const run = this.queue.then(() => this.prefill(tokens));
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * The native model as token-level runners see it: evalAsync falls back to the CPU when the
   * device fails (rebuilding the KV of the positions before `pos` from kvTokens), so a request on
   * a failing device completes on the CPU instead of failing.
   */
  private withFallback(model: NativeModel): NativeModel {
    const evalWithFallback: NativeModel['evalAsync'] = async (tokens, pos, all, out) => {
      try {
        return await model.evalAsync(tokens, pos, all, out);
      } catch (e) {
        // The KV is gone with the placement: rebuild the positions before `pos` on the CPU.
        const before = this.kvTokens.slice(0, pos);
        if (!this.deviceFailed(e)) throw e;
        for (let p = 0; p < before.length; p += PROMPT_CHUNK) await model.evalAsync(Int32Array.from(before.slice(p, p + PROMPT_CHUNK)), p);
        this.kvTokens.push(...before);
        return model.evalAsync(tokens, pos, all, out);
      }
    };
    return withOverrides(model, { evalAsync: evalWithFallback });
  }

  /** Switches per-op timing of the forward pass on or off (and resets the counters). */
  setProfiling(on: boolean): void {
    this.model().profiling = on;
  }

  /** Measured time per op of the compiled forward pass since profiling was switched on. */
  opProfile(): NativeOpTiming[] {
    return this.model().opProfile();
  }

  dispose(): void {
    this.feedback?.persist();
    void this.sched?.close();
    this.native?.dispose();
    this.native = undefined;
    this.kvTokens = [];
  }

  private model(): NativeModel {
    if (!this.native) throw new EngineError('engine: already disposed');
    return this.native;
  }

  /** The prompt speed of the engine's own prefill (generate, logits): sizes its steps. */
  private readonly promptSpeed = new PromptSpeed();
  /** The native steps of the last prefill, in order: rows and the positions before them. */
  private promptSteps: { rows: number; context: number }[] = [];

  /**
   * The native steps the last generate() or logits() ran its prompt in (each traced as one step),
   * in order: their rows and the context before them.
   */
  lastPromptSteps(): readonly { rows: number; context: number }[] {
    return this.promptSteps;
  }

  /** Brings the KV cache to `tokens` (reusing the common prefix) and returns the last logits. */
  private async prefill(tokens: number[], signal?: AbortSignal): Promise<Float32Array> {
    const model = this.model();
    if (tokens.length === 0) throw new EngineError('prompt is empty (no tokens)');
    let same = 0;
    const limit = Math.min(tokens.length, this.kvTokens.length);
    while (same < limit && tokens[same] === this.kvTokens[same]) same++;
    // The last prompt token is always evaluated again: its logits are needed.
    let pos = Math.min(same, tokens.length - 1);
    model.clearKv(pos);
    this.kvTokens.length = pos;
    let logits: Float32Array | undefined;
    // Steps as the scheduler sizes a foreground prompt's (prompt-steps.ts): an abort is seen
    // within about SOLO_PROMPT_MS, and a long prompt is not cut into steps that each stream the
    // weights again for a few rows.
    const maxRows = Math.min(PREFILL_BATCH, this.contextLength);
    // The native model cuts an evaluation into steps of the rows its scratch holds: 64 on a device.
    const nativeRows = model.deviceStats ? Math.min(maxRows, nativeOpTable().deviceStepRows) : maxRows;
    this.promptSteps = [];
    while (pos < tokens.length) {
      if (signal?.aborted) break;
      const chunk = tokens.slice(pos, pos + this.promptSpeed.nextRows(SOLO_PROMPT_MS, maxRows));
      const t0 = performance.now();
      logits = await this.evalTokens(chunk, pos);
      this.promptSpeed.observe(chunk.length, performance.now() - t0);
      for (let r = 0; r < chunk.length; r += nativeRows) this.promptSteps.push({ rows: Math.min(nativeRows, chunk.length - r), context: pos + r });
      this.kvTokens.push(...chunk);
      pos += chunk.length;
    }
    if (!logits) throw new EngineError('cancelled');
    return logits;
  }

  private async generateNow(prompt: string, opts: GenerateOptions): Promise<GenerateResult> {
    const model = this.model();
    if (!Number.isInteger(opts.maxTokens) || opts.maxTokens < 0) throw new EngineError(`maxTokens must be a non-negative integer, got ${opts.maxTokens}`);
    const sampler = new Sampler(opts);
    const promptTokens = this.tokenizer.encode(prompt, { addBos: opts.addBos ?? this.tokenizer.addBos, parseSpecial: opts.parseSpecial ?? false });
    const ctx = model.contextLength;
    if (promptTokens.length === 0) throw new EngineError('prompt is empty (no tokens, and no BOS is added)');
    if (promptTokens.length >= ctx) {
      throw new EngineError(`prompt has ${promptTokens.length} tokens but the context holds ${ctx} (at least one position is needed to generate); shorten the prompt or load with a larger context (${this.contextFlag})`);
    }
    const signal = opts.signal;
    const t0 = performance.now();
    const result = (stopReason: StopReason, text: string, generated: number[], promptMs: number, t1: number): GenerateResult => {
      const generateMs = performance.now() - t1;
      return {
        text,
        tokens: generated,
        promptTokens: promptTokens.length,
        generatedTokens: generated.length,
        promptMs,
        generateMs,
        tokensPerSecond: generateMs > 0 ? (generated.length / generateMs) * 1000 : 0,
        stopReason,
      };
    };
    if (signal?.aborted) return result('cancelled', '', [], 0, t0);

    let logits: Float32Array;
    try {
      logits = await this.prefill(promptTokens, signal);
    } catch (e) {
      if (signal?.aborted) return result('cancelled', '', [], performance.now() - t0, performance.now());
      throw e;
    }
    const t1 = performance.now();
    const promptMs = t1 - t0;
    const history = [...promptTokens];
    const generated: number[] = [];
    const decoder = this.tokenizer.createStreamDecoder();
    const stops = new StopStringFilter(opts.stop ?? []);
    let out = '';
    const emit = (text: string) => {
      if (!text) return;
      out += text;
      opts.onText?.(text);
    };
    let reason: StopReason = 'length';
    // The decode steps' logits go into one array: each is sampled before the next step.
    const decodeLogits = new Float32Array(logits.length);
    for (;;) {
      if (generated.length >= opts.maxTokens) break;
      if (signal?.aborted) { reason = 'cancelled'; break; }
      const id = sampler.sample(logits, history);
      if (this.tokenizer.isEog(id)) { reason = 'eos'; break; }
      generated.push(id);
      history.push(id);
      const piece = stops.push(decoder.push(id));
      emit(piece.text);
      if (piece.stopped) { reason = 'stop'; break; }
      if (generated.length >= opts.maxTokens) break;
      if (this.kvTokens.length >= ctx) { reason = 'context'; break; }
      if (signal?.aborted) { reason = 'cancelled'; break; }
      logits = await this.evalTokens([id], this.kvTokens.length, decodeLogits);
      this.kvTokens.push(id);
    }
    if (reason !== 'stop') {
      const tail = stops.push(decoder.flush());
      emit(tail.text);
      if (tail.stopped) reason = 'stop';
      else emit(stops.flush());
    }
    return result(reason, out, generated, promptMs, t1);
  }
}
