// The contract between the engine's front ends (CLI, LSP server, HTTP) and the runtime that
// runs a model. Front ends depend on these types only, never on the native addon directly.

export interface SamplingOptions {
  /** 0 means greedy (argmax). */
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repeatPenalty?: number;
  /** How many recent tokens the repetition penalty looks at. */
  repeatLastN?: number;
  seed?: number;
}

export interface GenerateOptions extends SamplingOptions {
  maxTokens: number;
  /** Generation ends before any of these strings would be emitted. */
  stop?: string[];
  /** Aborting stops generation within one decode step; the result has stopReason 'cancelled'. */
  signal?: AbortSignal;
  /** Text as it becomes complete UTF-8 (a token ending in a partial character waits). */
  onText?: (text: string) => void;
  /** Parse special-token text in the prompt (e.g. "<s>"). Default false. */
  parseSpecial?: boolean;
  /** Add BOS per the model's metadata. Default true. */
  addBos?: boolean;
}

export type StopReason = 'length' | 'eos' | 'stop' | 'cancelled';

export interface GenerateResult {
  text: string;
  tokens: number[];
  promptTokens: number;
  generatedTokens: number;
  promptMs: number;
  generateMs: number;
  /** Decode speed: generated tokens per second of decode time. */
  tokensPerSecond: number;
  stopReason: StopReason;
}

export interface LoadOptions {
  threads?: number;
  /** Context length for the KV cache; default min(model's training context, 4096). */
  contextLength?: number;
  onProgress?: (fraction: number, message: string) => void;
}

// Produced by engine/model/summary.ts; defined there so extension/ and webviews/ need not import the runtime.
export type { LayerSummary, LayerTensorSummary, ModelSummary } from '../model/summary-types';
