// Owns the loaded model for the server: loading and swapping it, and giving one completion at
// a time the engine. Policy (the spec left it open):
// - A new completion supersedes the one running: the older one is aborted (it ends within one
//   decode step and its request is answered with RequestCancelled, "superseded"), then the new
//   one starts. After a keystroke the older prefix is stale, so finishing it wastes the engine.
// - Loading a model aborts a running completion, waits for it, disposes the old model first
//   (two big models in memory at once could exhaust it), then loads. Loads run one at a time
//   in arrival order.
// - Requests that only read state (modelInfo, layers) never wait for the engine.
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { LSPErrorCodes, ResponseError } from 'vscode-languageserver';
import { Engine } from '../runtime/engine';
import type { ExecutionOptions, GenerateOptions, GenerateResult, LayerSummary, ModelSummary } from '../runtime/types';
import { Mutex } from './mutex';
import { FulcrumErrorCodes, type EngineState, type ModelInfo } from './protocol';

export interface LoadRequest {
  path: string;
  threads?: number;
  /** Device, VRAM budget and policy the model executes with. */
  execution?: Pick<ExecutionOptions, 'device' | 'vramBytes' | 'policy'>;
  onProgress?: (fraction: number, message: string) => void;
}

/** What a prompt builder may ask about the model that will run the prompt. */
export interface PromptModel {
  summary: ModelSummary;
  /** Tokens of `text` as generate() will see it (BOS included). */
  countTokens(text: string): number;
}

export interface ModelHostEvents {
  onStateChange?: (state: EngineState, modelPath: string | undefined, message: string | undefined) => void;
}

/** Why a completion was aborted; becomes the message of its RequestCancelled error. */
class AbortReason extends Error {}

export class ModelHost {
  private engine: Engine | undefined;
  private loadingPath: string | undefined;
  private lastError: string | undefined;
  private generating = false;
  /** The running (or waiting) completion's controller, so a newer one can supersede it. */
  private activeCompletion: AbortController | undefined;
  private readonly engineLock = new Mutex();

  constructor(private readonly events: ModelHostEvents = {}) {}

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
      info.execution = { device: ex.device, policy: ex.policy, split: ex.split, notes: ex.notes, ...(ex.fallback ? { fallback: ex.fallback } : {}) };
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
      throw new ResponseError(FulcrumErrorCodes.LoadFailed, `fulcrum/loadModel: ${problem}`);
    }
    this.activeCompletion?.abort(new AbortReason('cancelled: a model load started'));
    const release = await this.engineLock.lock();
    try {
      this.loadingPath = file;
      this.lastError = undefined;
      const previous = this.engine;
      this.engine = undefined;
      previous?.dispose();
      this.emitState(`loading ${file}`);
      try {
        const loadOptions = { ...(request.onProgress ? { onProgress: request.onProgress } : {}), ...(request.execution ?? {}) };
        this.engine = await Engine.load(file, request.threads !== undefined ? { ...loadOptions, threads: request.threads } : loadOptions);
      } catch (err) {
        this.lastError = `cannot load ${file}: ${messageOf(err)}`;
        throw new ResponseError(FulcrumErrorCodes.LoadFailed, `fulcrum/loadModel: ${this.lastError}`);
      } finally {
        this.loadingPath = undefined;
        this.emitState(this.lastError);
      }
      return this.engine.summary;
    } finally {
      release();
    }
  }

  /**
   * Generates a completion of the prompt `buildPrompt` makes for the model that holds the engine
   * (so the prompt is fitted to that model's context and tokenizer). Supersedes any
   * running completion. `signal` is the request's cancellation; either ends generation within
   * one decode step and rejects with a RequestCancelled ResponseError.
   */
  async complete(buildPrompt: (model: PromptModel) => string, options: Omit<GenerateOptions, 'signal'>,
    signal: AbortSignal): Promise<GenerateResult> {
    this.requireEngine();
    this.activeCompletion?.abort(new AbortReason('cancelled: superseded by a newer completion request'));
    const mine = new AbortController();
    this.activeCompletion = mine;
    const onCancel = () => mine.abort(new AbortReason('cancelled by the client ($/cancelRequest)'));
    if (signal.aborted) onCancel(); else signal.addEventListener('abort', onCancel, { once: true });
    const release = await this.engineLock.lock();
    try {
      if (mine.signal.aborted) throw cancelled(mine.signal);
      const engine = this.requireEngine();
      this.generating = true;
      this.emitState();
      try {
        const prompt = buildPrompt({
          summary: engine.summary,
          countTokens: (text) => engine.tokenizer.encode(text, { addBos: options.addBos ?? engine.tokenizer.addBos }).length,
        });
        const result = await engine.generate(prompt, { ...options, signal: mine.signal });
        if (result.stopReason === 'cancelled') throw cancelled(mine.signal);
        return result;
      } catch (err) {
        if (err instanceof ResponseError) throw err;
        if (mine.signal.aborted) throw cancelled(mine.signal);
        throw new ResponseError(FulcrumErrorCodes.GenerateFailed, `generation failed: ${messageOf(err)}`);
      } finally {
        this.generating = false;
        this.emitState();
      }
    } finally {
      signal.removeEventListener('abort', onCancel);
      if (this.activeCompletion === mine) this.activeCompletion = undefined;
      release();
    }
  }

  /** Stops any completion and frees the model (server shutdown). */
  async dispose(): Promise<void> {
    this.activeCompletion?.abort(new AbortReason('cancelled: the server is shutting down'));
    const release = await this.engineLock.lock();
    try {
      this.engine?.dispose();
      this.engine = undefined;
    } finally {
      release();
    }
  }

  private requireEngine(): Engine {
    if (this.engine) return this.engine;
    if (this.loadingPath !== undefined) {
      throw new ResponseError(FulcrumErrorCodes.ModelLoading, `the model ${this.loadingPath} is still loading; try again when fulcrum/state reports 'ready'`);
    }
    if (this.lastError !== undefined) {
      throw new ResponseError(FulcrumErrorCodes.NoModel, `no model loaded: ${this.lastError}`);
    }
    throw new ResponseError(FulcrumErrorCodes.NoModel,
      'no model loaded: send fulcrum/loadModel {path} or start the server with initializationOptions.modelPath');
  }

  private emitState(message?: string): void {
    this.events.onStateChange?.(this.state(), this.loadingPath ?? this.engine?.summary.path, message);
  }
}

function cancelled(signal: AbortSignal): ResponseError<void> {
  const reason: unknown = signal.reason;
  const message = reason instanceof AbortReason ? reason.message : 'cancelled';
  return new ResponseError(LSPErrorCodes.RequestCancelled, message);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
