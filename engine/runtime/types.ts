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

/** 'length': the token limit; 'context': the context (KV cache) is full; 'nonfinite': the model produced NaN/Inf logits. */
export type StopReason = 'length' | 'context' | 'eos' | 'stop' | 'cancelled';

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

export interface LoadOptions extends ExecutionOptions {
  threads?: number;
  /** Context length for the KV cache; default min(model's training context, 4096). */
  contextLength?: number;
  /** How the caller's user sets the context, named in errors (default the CLI's `--ctx`). */
  contextOption?: string;
  /** Sequences with their own KV that one step may carry (multi-sequence steps); default 1. */
  maxSequences?: number;
  /**
   * KV positions of sequence 0 whose memory is committed at load, so the first request does not
   * pay for it (Model::prepare_kv); default a default completion's (prompt budget + 64), clamped
   * to the context; 0: none.
   */
  prepareKvPositions?: number;
  /**
   * Short steps whose last one took at most this many ms run on the JS thread instead of a worker
   * thread (engine/runtime/inline-steps.ts; default INLINE_STEP_BUDGET_MS, 0: always the worker).
   */
  inlineStepBudgetMs?: number;
  /**
   * Measured feedback (engine/runtime/feedback.ts): executed steps' per-op times fold into a
   * running correction of the profile's costs. On when the engine has a profile to predict with
   * (its device plan's, `feedback.profile`, or a `hardware` object); false: off.
   */
  feedback?: import('./feedback').RuntimeFeedbackOptions | false;
  onProgress?: (fraction: number, message: string) => void;
}

/** Which device the model executes on and under which policy's plan (engine/runtime/execution.ts). */
/** KV cache element formats the engine stores (ggml type names, as the planner's ModelShape.kvFormat has them). */
export const KV_FORMATS = ['F16', 'Q8_0'] as const;
export type KvFormat = (typeof KV_FORMATS)[number];

export interface ExecutionOptions {
  /** 'auto' (default): a real GPU when found, else the CPU; never an emulated device unless asked. */
  device?: import('./devices').DeviceChoice;
  /** Device memory the plan may use (for loopback: the arena's capacity). */
  vramBytes?: number;
  /** Loopback link cap in GB/s (default 0.4 × this machine's 1-thread copy bandwidth; 0: uncapped). */
  linkGBps?: number;
  linkLatencyUs?: number;
  /** Loopback kernel threads (default 1). */
  deviceThreads?: number;
  /** Policy whose plan executes (default 'auto'). */
  policy?: string;
  /**
   * The KV cache's element format (default 'F16'). 'Q8_0' (llama.cpp's `-ctk q8_0 -ctv q8_0`)
   * stores K and V in blocks of 32 values with one f16 scale: 53 % of the memory and of the bytes
   * decode attention reads, K and V rounded to 8 bits a block. The Vulkan attention shader reads
   * F16 KV: with Vulkan the plan keeps attention and the KV on the CPU (engine/plan/kv-format.ts).
   * The model's head size must be a multiple of 32 up to 256.
   */
  kvFormat?: KvFormat;
  /**
   * This machine's profile to plan with, or a function that gets it (called only when a device
   * needs a plan). The runtime does not profile by itself: its callers (CLI, LSP server) pass
   * engine/profile/profiler.ts's thisMachineProfile, so the runtime never imports the profiler
   * (which runs the runtime's benchmark: a circle).
   */
  hardware?: import('../hardware/types').HardwareProfile | (() => Promise<import('../hardware/types').HardwareProfile>);
  /** A measured correction of the profile's costs the plan applies (engine/cost/feedback.ts). */
  correction?: import('../cost/feedback').CostCorrection;
  /** The workload the plan is made for (default batch 1, prompt min(1024, context/2), gen 64). */
  workload?: import('../cost/types').Workload;
  /** Told when the device fails and the engine falls back to the CPU. */
  onFallback?: (reason: string) => void;
  /** Told when a request outgrows the plan and the engine re-plans (engine/runtime/replan.ts). */
  onReplan?: (event: import('./replan').ReplanEvent) => void;
}

/** What executes: the device, the plan and its split, and any fallback. */
export interface ExecutionInfo {
  device: import('./devices').ExecutionDevice;
  /** Why this device (e.g. 'no GPU found (vulkan: not built …)'). */
  deviceReason: string;
  /** The executed plan's policy ('cpu-only' without a device). */
  policy: string;
  plan?: import('../plan/types').Plan;
  /** e.g. 'GPU 18/24 layers · KV host'. */
  split: string;
  /** Decisions the lowering made where the plan was silent. */
  notes: string[];
  /** Set once the device failed: the reason; the model then runs on the CPU. */
  fallback?: string;
  /** Re-plans made while running, oldest first (a request outgrew the plan's KV). */
  replans?: import('./replan').ReplanEvent[];
  /** What the plan was made from, so it can be simulated again next to the measured trace. */
  planParams?: import('../plan/api').PlanParams;
}

// Produced by engine/model/summary.ts; defined there so extension/ and webviews/ need not import the runtime.
export type { LayerSummary, LayerTensorSummary, ModelSummary } from '../model/summary-types';
