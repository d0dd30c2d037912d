// The Fulcrum-specific part of the engine's LSP protocol: custom requests, notifications and
// error codes. Shared by the server (engine/server), the VS Code client (extension/) and the
// LSP tests, so the method names and shapes live in exactly one place. Plain names and types
// only: the server, the client and the tests each use their own copy of the JSON-RPC library,
// so request-type objects are not shared.
import type { KvFormat, StopReason } from '../runtime/types';
import type { RunsOn } from '../runtime/lowering';
import type { LayerSummary, ModelSummary } from '../model/summary-types';
import type { Plan } from '../plan/types';
export type { LayerSummary, LayerTensorSummary, ModelSummary } from '../model/summary-types';
export type { RunsOn } from '../runtime/lowering';

/** `initializationOptions` of the `initialize` request. Every field is optional. */
export interface FulcrumInitializationOptions {
  /** A GGUF file to load right after `initialized` (progress is reported with `$/progress`). */
  modelPath?: string;
  /** CPU threads for the runtime; default: the runtime's choice. */
  threads?: number;
  /** Most tokens one inline completion may generate (n_predict cap); default 64. */
  maxCompletionTokens?: number;
  /** Where the model executes: 'auto' (default: a GPU when found, else the CPU), 'cpu', 'vulkan' (a GPU through Vulkan), or 'loopback' (emulated). */
  device?: 'auto' | 'cpu' | 'loopback' | 'vulkan';
  /** Device memory the plan may use, e.g. '6G' or a byte count. */
  vram?: string | number;
  /** The policy whose plan executes; default 'auto'. */
  policy?: string;
  /**
   * The KV cache's element format: 'F16' (default) or 'Q8_0' (K and V in 8-bit blocks of 32,
   * llama.cpp's `-ctk q8_0 -ctv q8_0`: 53 % of the memory and of decode attention's reads;
   * with a Vulkan device attention and the KV stay on the CPU, the matmuls go to the GPU). The
   * model's head size must be a multiple of 32 up to 256.
   */
  kvFormat?: KvFormat;
  /** Prompt budget of an inline completion in tokens (prefix:suffix 3:1); default 1024. */
  promptBudget?: number;
  /** Cap on generating one inline completion in ms, after its prompt is processed; 0 = none; default 1500. */
  completionTimeLimitMs?: number;
  /**
   * Show what we have: a completion still decoding this many ms after it was asked returns the
   * text so far, and fulcrum/completionExtended follows when the full one is in the cache;
   * 0 = off (the default without this option).
   */
  showPartialAfterMs?: number;
  /**
   * Most time a completion spends evaluating prompt tokens that are not cached yet, ms, at the
   * measured prompt speed: a longer prompt (the first completion in a big file) is cut to the
   * text nearest the cursor, and the whole prompt is then evaluated in the background for the
   * completions after it; 0 = no limit (the default without this option).
   */
  maxPromptMs?: number;
  /** Keep recent completions and serve typed-through ones from them; default true. */
  completionCache?: boolean;
  /** Put chunks of recently used other documents before the FIM prompt (within the budget); default false. */
  extraContext?: boolean;
  /** Evaluate every prompt token after a keystroke instead of reusing the suffix's KV at shifted positions; default false. */
  exactPrompt?: boolean;
  /** Complete on a remote server (llama-server, OpenAI-compatible, or another Fulcrum): its base URL. */
  completionEndpoint?: string;
  /** 'auto' (default): /infill, else /v1/completions. */
  completionEndpointKind?: 'auto' | 'infill' | 'openai';
  /** Bearer token for the endpoint. */
  completionEndpointToken?: string;
}

/** fulcrum/completionOptions (client → server): new completion settings, applied to the next request. */
export type CompletionOptionsParams = Pick<FulcrumInitializationOptions, 'maxCompletionTokens' | 'promptBudget' | 'completionTimeLimitMs' | 'showPartialAfterMs' | 'maxPromptMs' | 'completionCache' | 'extraContext' | 'exactPrompt' | 'completionEndpoint' | 'completionEndpointKind' | 'completionEndpointToken'>;

export interface LoadModelParams {
  path: string;
  threads?: number;
  device?: 'auto' | 'cpu' | 'loopback' | 'vulkan';
  vram?: string | number;
  policy?: string;
  kvFormat?: KvFormat;
  /** Set by clients that created the work-done progress themselves. */
  workDoneToken?: string | number;
}

export type EngineState = 'no-model' | 'loading' | 'ready' | 'generating' | 'error';

export interface ModelInfo {
  state: EngineState;
  /** The loaded model, when one is loaded (also while a completion runs). */
  summary?: ModelSummary;
  /** The file being loaded while state is 'loading'. */
  loadingPath?: string;
  /** Why the last load failed, while state is 'error'. */
  error?: string;
  /** What executes the loaded model: device, policy and split (e.g. "GPU 18/24 layers · KV host"). */
  execution?: ExecutionSummary;
}

export interface ExecutionSummary {
  device: 'cpu' | 'loopback' | 'vulkan';
  policy: string;
  split: string;
  /** Set when the device failed or refused the plan and the model runs on the CPU. */
  fallback?: string;
  notes: string[];
  /** Where each layer runs now (index → 'GPU' | 'CPU' | 'GPU+CPU'; -1: embedding and output): the split, per layer. */
  runsOn: Record<number, RunsOn>;
}

export interface LayersResult {
  model: ModelSummary;
  layers: LayerSummary[];
}

/** Sent after every finished inline completion (the status bar shows tokens/s). */
export interface CompletionStats {
  promptTokens: number;
  generatedTokens: number;
  promptMs: number;
  generateMs: number;
  tokensPerSecond: number;
  /**
   * 'time': the time cap; 'rule': a quality rule ended it; 'cached': served from the cache;
   * 'partial': the text so far at the show-partial deadline (the full one's stats follow).
   */
  stopReason: StopReason | 'time' | 'rule' | 'cached' | 'partial';
  /** Prompt tokens whose KV was reused from the previous completion (not evaluated again). */
  reusedTokens?: number;
  /** Wall time of the whole request in the engine, ms. */
  totalMs?: number;
  /** The FIM format of the prompt, or 'prefix-only'. */
  format?: string;
  /**
   * Set when maxPromptMs cut the prompt: the whole prompt's tokens (promptTokens is the cut
   * one's); the whole prompt is then read in the background.
   */
  wholePromptTokens?: number;
}

/**
 * Measured feedback (fulcrum/feedback): executed steps disagree with the profile's prediction by
 * more than 25 % over a window of steps, or a background re-measure of the profile finished.
 */
export interface FeedbackParams {
  /** One line for the status bar and the log. */
  message: string;
  /** The op classes that disagree (empty when a re-measure finished). */
  disagreements: { key: string; ratio: number; measuredMs: number; predictedMs: number; steps: number }[];
  /** The background re-measure: started now, already running, too soon after the last one, not possible, or done. */
  remeasure: 'started' | 'running' | 'too soon' | 'not possible' | 'done' | 'failed';
  /** The profile in use is noisy (measured on a busy machine): why. Absent otherwise. */
  noisyProfile?: string;
}

/**
 * Sent after every inline completion that tried the remote endpoint (fulcrum.completions.endpoint):
 * where it ran, or why the endpoint failed and what answered instead, for the status bar.
 */
export interface RemoteStatusParams {
  /** The endpoint as 'HOST' or 'HOST (PATH)' once the API is known. */
  endpoint: string;
  ok: boolean;
  /** Why the endpoint failed (host, path, status or time limit). */
  reason?: string;
  /** What answered after a failure: the local model, or nothing (no model loaded). */
  fallback?: 'local' | 'none';
}

export interface StateParams {
  state: EngineState;
  /** The model file the state refers to, when there is one. */
  modelPath?: string;
  message?: string;
}

/**
 * Requests: fulcrum/loadModel (LoadModelParams → ModelSummary), fulcrum/modelInfo (→ ModelInfo),
 * fulcrum/layers (→ LayersResult); the planner's fulcrum/plan and fulcrum/explain (PlanParams of
 * engine/plan/api.ts → Plan) and fulcrum/simulate (SimulateParams → SimulateResult), where
 * `model` defaults to the loaded model and `hardware` to 'this'; fulcrum/profile
 * ({quick?, refresh?, workDoneToken?} → {profile: HardwareProfile, cached, note?}).
 */
export const FulcrumRequests = {
  loadModel: 'fulcrum/loadModel',
  modelInfo: 'fulcrum/modelInfo',
  layers: 'fulcrum/layers',
  plan: 'fulcrum/plan',
  explain: 'fulcrum/explain',
  simulate: 'fulcrum/simulate',
  profile: 'fulcrum/profile',
  /** → PresetsResult: the names a what-if control offers. */
  presets: 'fulcrum/presets',
  /** ExportPlanParams → LlamaCppExport: engine flags reproducing a plan. */
  exportPlan: 'fulcrum/exportPlan',
  /**
   * StartHttpParams → HttpServerInfo: serves the loaded model over HTTP on 127.0.0.1 from this
   * process (the OpenAI-compatible API of `fulcrum serve --http`), through the same scheduler as
   * the editor's completions. Idempotent: a running server is returned as it is.
   */
  startHttp: 'fulcrum/startHttp',
  /** → null: stops the HTTP server (open streams end). */
  stopHttp: 'fulcrum/stopHttp',
  /**
   * MeasureParams → MeasureResult: a short traced run of the loaded model (prompt, then decode
   * steps) through the scheduler, measured per layer and op next to the plan of what runs.
   */
  measure: 'fulcrum/measure',
} as const;

export interface MeasureParams {
  /** Prompt tokens before the measured decode steps (default 64). */
  promptTokens?: number;
  /** Decode steps averaged (default 8). */
  decodeSteps?: number;
}

export interface StartHttpParams {
  /** Port on 127.0.0.1 (0 or absent: a free one). */
  port?: number;
  /** Bearer token clients must send; absent: a random one; null: no authentication. */
  token?: string | null;
}

export interface HttpServerInfo {
  url: string;
  port: number;
  /** The bearer token clients send (null: none needed). */
  token: string | null;
  /** The model served (its id in /v1/models). */
  model: string;
}

/**
 * Notifications: server → client fulcrum/state (StateParams), fulcrum/stats (CompletionStats),
 * fulcrum/feedback (FeedbackParams); fulcrum/remote (RemoteStatusParams);
 * fulcrum/completionExtended (CompletionExtendedParams);
 * client → server fulcrum/completionOptions (CompletionOptionsParams), fulcrum/warmCompletion (WarmCompletionParams).
 */
export const FulcrumNotifications = {
  state: 'fulcrum/state',
  stats: 'fulcrum/stats',
  feedback: 'fulcrum/feedback',
  remote: 'fulcrum/remote',
  completionOptions: 'fulcrum/completionOptions',
  warmCompletion: 'fulcrum/warmCompletion',
  completionExtended: 'fulcrum/completionExtended',
} as const;

/**
 * fulcrum/completionExtended (server → client): an inline completion answered with a partial text
 * (showPartialAfterMs) has finished, and its full text is longer; asking again at the same cursor
 * in the same document version is served from the cache. The client asks again (VS Code: trigger
 * the inline suggestion) only if the cursor is still there.
 */
export interface CompletionExtendedParams {
  textDocument: { uri: string; version: number };
  position: { line: number; character: number };
  /** Characters of the full completion (the partial one had `partialLength`). */
  length: number;
  partialLength: number;
}

/**
 * fulcrum/warmCompletion (client → server): a document got focus (or opened) with the cursor at
 * `position`; the engine evaluates the prompt a completion there would have, generating nothing,
 * so the first completion evaluates only what changed since. Ignored without a local model.
 */
export interface WarmCompletionParams {
  textDocument: { uri: string };
  position: { line: number; character: number };
}

/**
 * Server-defined JSON-RPC error codes (the range -32099..-32000 is reserved for servers).
 * Standard codes are used where they fit: InvalidParams for malformed params, MethodNotFound for
 * unknown methods, LSP's RequestCancelled for cancelled or superseded completions.
 */
export const FulcrumErrorCodes = {
  /** A request needs a model and none is loaded (or the last load failed). */
  NoModel: -32001,
  /** A request needs a model and one is still loading. */
  ModelLoading: -32002,
  /** fulcrum/loadModel failed: missing file, not a GGUF, unsupported architecture… */
  LoadFailed: -32003,
  /** The runtime failed while generating. */
  GenerateFailed: -32004,
  /** fulcrum/startHttp could not listen (e.g. the port is taken). */
  HttpFailed: -32005,
} as const;

// ---- Planner results as the extension and the webviews see them. Re-exported here so that
// extension/ and webviews/ import no other engine file.
export type { Plan, PlanStage, LayerPlan, OpPlan, OpPredicted, LaneTimes, Lane, Device, WeightResidency, PolicyName } from '../plan/types';
export type { Explanation, Decision, Alternative, WhatIf, Resource } from '../plan/explanation';
export type { PlanParams, SimulateParams, SimulateResult } from '../plan/api';
export type { TraceEvent } from '../plan/sim-types';

/** Extra fields a client may add to fulcrum/plan, fulcrum/explain and fulcrum/simulate params. */
export interface PlannerRequestExtras {
  /**
   * A group name: the server cancels every older, unfinished planner request of the same group
   * (the what-if panel sends 'what-if', so only the newest slider position is planned).
   */
  supersedes?: string;
}

/** Chrome trace-event JSON ("JSON Object Format"), as fulcrum/simulate returns with trace: true. */
export interface ChromeTrace {
  traceEvents: import('../plan/sim-types').TraceEvent[];
  displayTimeUnit?: 'ms' | 'ns';
  otherData?: Record<string, unknown>;
}

// Measured per-op times of one decode step (engine/runtime/measure.ts): optional everywhere,
// panels show predicted times only when absent; ops join the plan by layer index and op name.
export type { MeasuredOps, MeasureResult } from '../runtime/measure';
import type { MeasuredOps } from '../runtime/measure';

/** What the plan panel draws: a plan, and measured per-op times when the runtime has them. */
export interface PlanViewData { plan: Plan; measured?: MeasuredOps; }

/**
 * Heatmap row data of an MoE plan, one per layer (webviews/plan/heatmap.ts expertShareRows, from
 * the plan's experts ops): GPU share of the layer's routed-expert bytes, experts in VRAM of count.
 */
export interface ExpertShareRow { layer: number; gpuBytesShare: number; onGpu: number; count: number }

/** What the timeline panel draws: the simulated step, and a measured trace when there is one. */
export interface TimelineViewData { predicted: ChromeTrace; measured?: ChromeTrace; title: string }

export interface PresetsResult {
  gpus: { key: string; name: string; memoryBytes: number }[];
  machines: string[];
  models: string[];
  /** Weight formats a model preset can take (`llama-3.1-8b:Q4_K`). */
  formats: string[];
}

export interface ExportPlanParams { plan: Plan; format: 'llama.cpp' }
export type { LlamaCppExport } from '../plan/export-llamacpp';

export interface ProfileParams { quick?: boolean; refresh?: boolean; workDoneToken?: string | number }
export interface ProfileResult { profile: import('../hardware/types').HardwareProfile; cached: boolean; note?: string }
