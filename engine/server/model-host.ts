// Owns the loaded model for the server: loading and swapping it, and giving one completion at
// a time the engine. Policy (the spec left it open):
// - Completions follow engine/completion's supersede rule (a newer request aborts the
//   running one; it ends within one decode step and answers RequestCancelled, "superseded").
// - Loading a model aborts a running completion and waits for it. The new file is checked first
//   (GGUF header, hyperparameters, tokenizer, what the executor supports), so a file that is not
//   a usable model leaves the loaded one in place. Then the old model is disposed before the new
//   one loads (two big models in memory at once could exhaust it); if the native load still
//   fails, the previous model is loaded again. Loads run one at a time in arrival order.
// - Requests that only read state (modelInfo, layers) never wait for the engine.
import type { ReplanEvent } from '../runtime/replan';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { LSPErrorCodes, ResponseError } from 'vscode-languageserver';
import { readGguf } from '../model/gguf';
import { readHparams } from '../model/hparams';
import { availableMemoryBytes } from '../profile/profiler';
import { createTokenizer } from '../model/tokenizer';
import { Completer } from '../completion/completer';
import { abortMessage, LatestCompletionWins } from '../completion/supersede';
import { defaultThreads, Engine, nativeConfig } from '../runtime/engine';
import { measureRun, type MeasureResult } from '../runtime/measure';
import { thisMachineProfile } from '../profile/profiler';
import type { ExecutionOptions, KvFormat, LayerSummary, ModelSummary } from '../runtime/types';
import { kvBytesPerToken } from '../model/summary';
import { Mutex } from './mutex';
import { FulcrumErrorCodes, type EngineState, type FeedbackParams, type MeasureParams, type ModelInfo } from './protocol';
import { ServerFeedback } from './feedback';

export interface LoadRequest {
  path: string;
  threads?: number;
  /** Device, VRAM budget, policy and KV cache format the model executes with. */
  execution?: Pick<ExecutionOptions, 'device' | 'vramBytes' | 'policy' | 'kvFormat'>;
  onProgress?: (fraction: number, message: string) => void;
}

export interface ModelHostEvents {
  onStateChange?: (state: EngineState, modelPath: string | undefined, message: string | undefined) => void;
  /** Lines for the server's log (e.g. the model's FIM format, once per load). */
  onLog?: (message: string) => void;
  /** Measured steps disagree with the profile, or its background re-measure finished. */
  onFeedback?: (p: FeedbackParams) => void;
}

export class ModelHost {
  private engine: Engine | undefined;
  private completer: Completer | undefined;
  private loadedThreads: number | undefined;
  private loadedExecution: LoadRequest['execution'];
  private loadingPath: string | undefined;
  private lastError: string | undefined;
  private generating = false;
  private readonly completions = new LatestCompletionWins();
  /** The running or waiting cache warm-up (fulcrum/warmCompletion); any completion or load aborts it. */
  private warmUp: AbortController | undefined;
  private readonly engineLock = new Mutex();

  private readonly engineListeners: ((engine: Engine | undefined) => void | Promise<void>)[] = [];

  private readonly feedback: ServerFeedback;

  constructor(private readonly events: ModelHostEvents = {}) {
    this.feedback = new ServerFeedback(events);
  }

  /** The loaded engine, for surfaces that serve it through its scheduler (HTTP), else undefined. */
  servingEngine(): Engine | undefined {
    return this.engine;
  }

  /** Told after every load (the new engine, or undefined when none is left). */
  onEngineChanged(listener: (engine: Engine | undefined) => void | Promise<void>): void {
    this.engineListeners.push(listener);
  }

  state(): EngineState {
    if (this.loadingPath !== undefined) return 'loading';
    if (this.engine) return this.generating ? 'generating' : 'ready';
    return this.lastError !== undefined ? 'error' : 'no-model';
  }

  info(): ModelInfo {
    const info: ModelInfo = { state: this.state() };
    if (this.engine) {
      info.summary = this.engine.summary;
      const ex = this.engine.execution;
      info.execution = { device: ex.device, policy: ex.policy, split: ex.split, notes: ex.notes, runsOn: this.engine.runsOn(), ...(ex.fallback ? { fallback: ex.fallback } : {}) };
    }
    if (this.loadingPath !== undefined) info.loadingPath = this.loadingPath;
    if (this.lastError !== undefined && !this.engine) info.error = this.lastError;
    return info;
  }

  summary(): ModelSummary {
    return this.requireEngine().summary;
  }

  layers(): LayerSummary[] {
    return this.requireEngine().layers();
  }

  /** Loads `request.path`, replacing the current model. Rejects with a LoadFailed ResponseError. */
  async load(request: LoadRequest): Promise<ModelSummary> {
    const file = path.resolve(request.path);
    // Checked before anything is disposed, so a typo does not unload a working model.
    const problem = !existsSync(file) ? `no such file: ${file}` : !statSync(file).isFile() ? `not a file: ${file}` : undefined;
    if (problem !== undefined) {
      if (!this.engine && this.loadingPath === undefined) {
        this.lastError = `cannot load ${file}: ${problem}`;
        this.emitState(this.lastError);
      }
      throw new ResponseError(FulcrumErrorCodes.LoadFailed, `cannot load the model: ${problem}`);
    }
    this.completions.abort('cancelled: a model load started');
    this.warmUp?.abort();
    const release = await this.engineLock.lock();
    try {
      try {
        checkModelFile(file, request.threads);
      } catch (err) {
        const message = `cannot load ${file}: ${messageOf(err)}`;
        if (!this.engine) {
          this.lastError = message;
          this.emitState(message);
        }
        throw new ResponseError(FulcrumErrorCodes.LoadFailed, message);
      }
      this.loadingPath = file;
      this.lastError = undefined;
      const previous = this.engine;
      const previousThreads = this.loadedThreads;
      const previousExecution = this.loadedExecution;
      this.engine = undefined;
      this.completer = undefined;
      previous?.dispose();
      this.emitState(`loading ${file}`);
      try {
        // A re-plan (a request outgrew the plan's KV) refreshes the state: the status bar shows the new split, the log says why.
        const onReplan = (e: ReplanEvent) => this.emitState(`re-planned at ${e.atPosition} positions: ${e.fromSplit} → ${e.toSplit} (${e.reason})`);
        const feedback = this.feedback.options();
        const loadOptions = { ...(request.onProgress ? { onProgress: request.onProgress } : {}), ...(request.execution ?? {}), ...(feedback ? { feedback } : {}), onReplan, maxSequences: kvSlotsFor(file, request.execution?.kvFormat), hardware: thisMachineProfile, contextOption: 'the editor loads min(training context, 4096) positions; `fulcrum serve --http --ctx N` serves a longer one' };
        this.engine = await Engine.load(file, request.threads !== undefined ? { ...loadOptions, threads: request.threads } : loadOptions);
        this.loadedThreads = request.threads;
        this.loadedExecution = request.execution;
      } catch (err) {
        const message = `cannot load ${file}: ${messageOf(err)}`;
        if (previous) {
          // Bring back the model that was working.
          this.engine = await Engine.load(previous.summary.path, { ...(previousExecution ?? {}), hardware: thisMachineProfile, maxSequences: kvSlotsFor(previous.summary.path, previousExecution?.kvFormat), ...(previousThreads !== undefined ? { threads: previousThreads } : {}) }).catch(() => undefined);
        }
        if (!this.engine) this.lastError = message;
        throw new ResponseError(FulcrumErrorCodes.LoadFailed, message);
      } finally {
        this.loadingPath = undefined;
        if (this.engine) this.completer = new Completer(this.engine, this.events.onLog);
        for (const l of this.engineListeners) await Promise.resolve(l(this.engine)).catch((e: unknown) => this.events.onLog?.(`after the model changed: ${messageOf(e)}`));
        this.emitState(this.lastError);
      }
      // A listener may not unload the model, but TypeScript cannot know the await did not.
      return this.requireEngine().summary;
    } finally {
      release();
    }
  }

  /**
   * Runs `run` with the loaded model's Completer, after any earlier engine user; supersedes any
   * running completion. `signal` is the request's cancellation; either ends generation within
   * one decode step and rejects with a RequestCancelled ResponseError.
   */
  async complete<T>(run: (completer: Completer, signal: AbortSignal) => Promise<T>, signal: AbortSignal): Promise<T> {
    this.requireEngine();
    // A warm-up gives way at once (within one step); the KV it evaluated stays for this completion.
    this.warmUp?.abort();
    const mine = this.completions.begin(signal);
    const release = await this.engineLock.lock();
    // A partial completion (show what we have) returns while decoding goes on: the engine stays
    // this completion's, and the next request supersedes it, until its `rest` settles.
    let rest: Promise<unknown> | undefined;
    let started = false;
    const finish = () => {
      if (started) {
        this.generating = false;
        this.emitState();
      }
      mine.end();
      release();
    };
    try {
      if (mine.signal.aborted) throw cancelled(mine.signal);
      this.requireEngine();
      const completer = this.completer!;
      this.generating = true;
      started = true;
      this.emitState();
      try {
        const result = await run(completer, mine.signal);
        if (mine.signal.aborted) throw cancelled(mine.signal);
        rest = continuationOf(result);
        return result;
      } catch (err) {
        if (err instanceof ResponseError) throw err;
        if (mine.signal.aborted) throw cancelled(mine.signal);
        throw new ResponseError(FulcrumErrorCodes.GenerateFailed, `the completion failed: ${messageOf(err)}`);
      }
    } finally {
      if (rest) void rest.then(finish, finish);
      else finish();
    }
  }

  /**
   * Runs a cache warm-up (`run`, e.g. Completer.warm) when the engine is free: after any earlier
   * engine user, before none (a completion or a load that arrives aborts it, and it ends within
   * one step). A newer warm-up replaces a waiting or running one. undefined when no model is
   * loaded or it was aborted before it started.
   */
  async warm<T>(run: (completer: Completer, signal: AbortSignal) => Promise<T>): Promise<T | undefined> {
    if (!this.engine) return undefined;
    this.warmUp?.abort();
    const mine = new AbortController();
    this.warmUp = mine;
    const release = await this.engineLock.lock();
    try {
      if (mine.signal.aborted || !this.completer) return undefined;
      return await run(this.completer, mine.signal);
    } finally {
      if (this.warmUp === mine) this.warmUp = undefined;
      release();
    }
  }

  /**
   * A short traced run of the loaded model, measured next to the plan of what runs. Holds the
   * engine like a completion does (a model load or a completion waits for it: a 64-token prompt
   * and 9 decode steps, about 0.2 s on the 0.5B model here); HTTP requests share its steps.
   */
  async measure(params: MeasureParams, signal: AbortSignal): Promise<MeasureResult> {
    const release = await this.engineLock.lock();
    try {
      const engine = this.requireEngine();
      return await measureRun(engine, { ...params, signal, hardware: thisMachineProfile });
    } catch (err) {
      if (err instanceof ResponseError) throw err;
      throw new ResponseError(FulcrumErrorCodes.GenerateFailed, `the measurement failed: ${messageOf(err)}`);
    } finally {
      release();
    }
  }

  /** Stops any completion and frees the model (server shutdown). */
  async dispose(): Promise<void> {
    this.completions.abort('cancelled: the server is shutting down');
    this.feedback.stop();
    const release = await this.engineLock.lock();
    try {
      this.engine?.dispose();
      this.engine = undefined;
      this.completer = undefined;
    } finally {
      release();
    }
  }

  private requireEngine(): Engine {
    if (this.engine) return this.engine;
    if (this.loadingPath !== undefined) {
      throw new ResponseError(FulcrumErrorCodes.ModelLoading, `the model ${this.loadingPath} is still loading; completions start when it is ready`);
    }
    if (this.lastError !== undefined) {
      throw new ResponseError(FulcrumErrorCodes.NoModel, `no model loaded: ${this.lastError}; set fulcrum.modelPath to a GGUF model file`);
    }
    throw new ResponseError(FulcrumErrorCodes.NoModel,
      'no model loaded: set fulcrum.modelPath to a GGUF model file');
  }

  private emitState(message?: string): void {
    this.events.onStateChange?.(this.state(), this.loadingPath ?? this.engine?.summary.path, message);
  }
}

function cancelled(signal: AbortSignal): ResponseError<void> {
  return new ResponseError(LSPErrorCodes.RequestCancelled, abortMessage(signal));
}

/** Throws, naming the problem, when `file` is not a model the engine can load (header checks only). */
function checkModelFile(file: string, threads: number | undefined): void {
  const gguf = readGguf(file);
  const hp = readHparams(gguf);
  createTokenizer(gguf);
  nativeConfig(gguf, hp, Math.min(hp.contextLength, 4096), threads ?? defaultThreads());
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * KV slots for completions: one KV sequence per recently edited document (engine/runtime/engine.ts
 * slotFor), so switching files reuses each file's prompt prefix. Decision: 4 slots, fewer when
 * their KV (the whole context each, the load-time memory check counts it) would pass a quarter of
 * the memory available now; pages are only taken as positions are written.
 */
export const KV_SLOTS = 4;
function kvSlotsFor(file: string, kvFormat: KvFormat = 'F16'): number {
  try {
    const hp = readHparams(readGguf(file));
    const ctx = Math.min(hp.contextLength, 4096);
    const perSequence = kvBytesPerToken(hp, kvFormat) * ctx;
    const available = availableMemoryBytes();
    if (!(available > 0) || !(perSequence > 0)) return 1;
    return Math.max(1, Math.min(KV_SLOTS, Math.floor(available / 4 / perSequence)));
  } catch {
    return 1;  // the load itself reports what is wrong with the file
  }
}

/** The decoding still running behind a partial completion (CursorCompletion.rest), if any. */
function continuationOf(result: unknown): Promise<unknown> | undefined {
  if (typeof result !== 'object' || result === null || !('rest' in result)) return undefined;
  const rest = (result as { rest?: unknown }).rest;
  return rest instanceof Promise ? rest : undefined;
}
