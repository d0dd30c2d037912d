// HardwareProfile: what the planner knows about one machine. Either measured on this machine by
// the profiler (engine/profile/profiler.ts, cached per fingerprint) or a preset built from a
// paper's table / a public specification (engine/hardware/presets.ts). Plain JSON, versioned.
//
// Units are fixed by the field names: *Bytes = bytes, *GBps = 1e9 bytes/s, *Gflops = 1e9 FLOP/s,
// *Tflops = 1e12 FLOP/s, *Us = microseconds. Efficiencies are fractions in (0, 1].

/** Bump when a field changes meaning; readers reject other versions. */
export const HARDWARE_PROFILE_VERSION = 1;

/**
 * Weight/KV storage formats by their ggml type name ('F32', 'F16', 'BF16', 'Q8_0', 'Q4_0',
 * 'Q4_K', 'Q6_K', …). A string so profiles can carry formats the planner does not know yet.
 */
export type FormatName = string;

/** Spread of repeated timings, in the unit of the median it accompanies. */
export interface Spread { min: number; max: number; /** Timed runs (warm-ups excluded). */ runs: number }

/** CPU instruction-set features that change which kernels run (and how fast). */
export interface CpuIsa {
  avx2: boolean;
  fma: boolean;
  f16c: boolean;
  avx512f: boolean;
  avx512vnni: boolean;
  avx512bf16: boolean;
  /** Intel AMX tiles (AMX-BF16/INT8): the LIA paper's CPU matrix engine. */
  amx: boolean;
}

/**
 * One measured (or specified) CPU kernel rate at one thread count.
 * GEMV (decode linear ops) is memory-bound: `gbps` = weight bytes streamed per second.
 * GEMM (prefill, large batch) is compute-bound: `gflops` = useful FLOP/s.
 * Both fields may be present; the cost model uses the one that matches the kernel.
 */
export interface CpuKernelRate {
  kernel: 'gemv' | 'gemm';
  format: FormatName;
  threads: number;
  gbps?: number;
  gflops?: number;
  /** Token rows of the measurement (GEMV = 1; GEMM at several counts, e.g. 32/128/512). */
  tokens?: number;
  /** Of gbps (GEMV) or gflops (GEMM). */
  spread?: Spread;
}

/** Decode attention on the CPU (scores + softmax + weighted values over a KV cache). */
export interface CpuAttentionRate {
  /** KV length (tokens) the point was measured at; the cost model interpolates between points. */
  kvLength: number;
  threads: number;
  /** KV-cache bytes read per second (K and V together). */
  gbps: number;
  spread?: Spread;
  /** Attention shape measured (query heads, KV heads, head size). */
  heads?: number;
  kvHeads?: number;
  headDim?: number;
}

/** The measurement behind CpuProfile.contentionFactor (paper 000 §2.1, Fig. 10a). */
export interface ContentionMeasurement {
  kernel: 'gemv' | 'gemm';
  format: FormatName;
  threads: number;
  aloneMs: number;
  contendedMs: number;
  transfer: 'host-memcpy';
  transferGBps: number;
}

/**
 * End-to-end calibration of the CPU rates (issue 14): the native executor decodes and prefills a
 * synthetic calibration model, and the GEMV / GEMM rates are scaled so that the cost model's
 * prediction for that model equals the measurement. Microbenchmarks run one matrix at a time;
 * a real step adds cache effects across matrices, thread hand-offs and the ops between them.
 */
export interface CpuCalibration {
  /** Multiplier of every measured GEMV rate (decode), fitted on the calibration model. */
  gemvScale: number;
  /** Multiplier of every measured GEMM rate (prefill), fitted after gemvScale. */
  gemmScale: number;
  /**
   * Fixed cost of one CPU op (µs), fitted jointly with gemvScale from a second, small-matrix
   * calibration model (many ops, few bytes); absent = the cost model's default (5 µs).
   */
  opOverheadUs?: number;
  /** The small-matrix model's measured decode (tok/s), when opOverheadUs was fitted. */
  smallModelDecodeTokensPerS?: number;
  /** What was run: the synthetic model's shape and format, tokens, threads. */
  model: string;
  format: FormatName;
  threads: number;
  promptTokens: number;
  genTokens: number;
  /** Measured: the fastest of the runs (outside load only slows a run down). */
  prefillTokensPerS: number;
  decodeTokensPerS: number;
  runs: number;
  /** Every run's figures, in order (tok/s), so a reader sees the spread the fastest was taken from. */
  prefillRunsTokensPerS?: number[];
  decodeRunsTokensPerS?: number[];
  /** Whether the two fastest runs agreed within the tolerance (see calibration-run.ts). */
  agreed?: boolean;
}

export interface CpuProfile {
  name: string;
  /** Physical cores. */
  cores: number;
  /** Hardware threads (SMT). */
  threads: number;
  isa: CpuIsa;
  /** Per-format kernel rates, by thread count. The cost model takes the best over threads. */
  kernels: CpuKernelRate[];
  /** Attention throughput by KV length. Empty → the cost model uses memory.readGBps × 0.5. */
  attention: CpuAttentionRate[];
  /** Sustained DRAM bandwidth seen by the cores (best over thread counts), with the sweep. */
  memory: {
    readGBps: number;
    copyGBps: number;
    byThreads?: { threads: number; readGBps: number; copyGBps: number }[];
    bufferBytes?: number;
  };
  /**
   * CPU time multiplier while a host→device transfer runs concurrently (≥ 1). Paper 000 Fig. 10a:
   * concurrent DRAM traffic nearly doubles CPU GEMM latency (≈ 1.9).
   */
  contentionFactor: number;
  contention?: ContentionMeasurement;
  /** Peak FLOP/s of the CPU for compute-bound kernels (specification or best GEMM measured). */
  peakGflops: number;
  /** Absent: the kernel rates are used as measured. */
  calibration?: CpuCalibration;
}

export interface GpuProfile {
  name: string;
  memoryBytes: number;
  /** Dense FP16/BF16 tensor throughput, specification (or measured peak). */
  fp16Tflops: number;
  /** Device memory bandwidth, specification (or measured peak). */
  memoryGBps: number;
  /** Fractions of the peaks reached in practice: GEMM (compute), GEMV and attention (bandwidth). */
  efficiency: { gemm: number; gemv: number; attention: number };
  /** Fixed cost per kernel launch; dominates tiny ops. */
  launchOverheadUs: number;
  /** Memory the runtime/driver keeps for itself (CUDA context, workspace). */
  reservedBytes: number;
  /**
   * GPUDirect Storage (NVMe → VRAM without a host bounce, paper 000 §2.1). Data-center and
   * workstation parts only; GeForce cards do not support it. Absent = unknown = not used.
   */
  gds?: boolean;
  /**
   * Measured rates of the device's own matmul kernels per weight format (Vulkan: the addon's
   * shaders); the cost model uses them for ops of that format instead of memoryGBps × efficiency.
   */
  kernels?: { format: string; gemvGBps: number; gemmTflops: number }[];
  /**
   * The device these figures were measured on, when measured (presets have none): the Vulkan
   * device the executor runs on, its VkPhysicalDeviceType, and whether it is a software device
   * (type `cpu`, e.g. Mesa's lavapipe: it runs on this machine's own cores).
   */
  measuredOn?: { api: 'vulkan'; device: string; type: string; software: boolean };
  /**
   * KV cache formats the device's attention kernels read (the Vulkan shader: F16). Absent: every
   * format (presets, the loopback device, which runs the CPU's kernels).
   */
  kvFormats?: string[];
}

/** Host↔device link (PCIe or C2C). */
export interface LinkProfile {
  name: string;
  h2dPinnedGBps: number;
  h2dPageableGBps: number;
  d2hPinnedGBps: number;
  d2hPageableGBps: number;
  /** Per-transfer fixed latency. */
  latencyUs: number;
  /** PCIe generation and lane count of the slot (e.g. 4 and 8 for a laptop RTX 4060); absent = unknown. */
  pcieGen?: number;
  pcieLanes?: number;
}

/** NVMe storage readable straight into the GPU (GPUDirect Storage), paper 000 §2.1. */
export interface NvmeProfile {
  devices: number;
  /** Aggregate storage→device bandwidth over all devices. */
  readGBps: number;
}

export interface ProfileSource {
  kind: 'measured' | 'preset';
  /** Paper table or public specification (presets); tool and date (measured). */
  citation: string;
  /** Machine fingerprint the measured profile belongs to (profiler cache key). */
  fingerprint?: string;
  /** ISO-8601 time of measurement. */
  measuredAt?: string;
  /** A shortened profiling run (fewer repetitions). */
  quick?: boolean;
  /** How long profiling took. */
  durationMs?: number;
  /**
   * Why this measurement is not trusted enough to cache (repeated probes disagreed beyond their
   * noise even after re-measuring: the machine was busy). Absent: the probes agreed.
   */
  unsettled?: string;
  /** How busy the machine was while it was measured (engine/profile/noise.ts). */
  noise?: ProfileNoiseReading;
}

/** The machine's load while a profile was measured and the spread of its repeated runs. */
export interface ProfileNoiseReading {
  /** Logical CPUs of the machine. */
  cpus: number;
  /** Highest 1-minute load average seen at the start and the end. */
  loadAverage: number;
  /** CPUs' worth of time other processes took during the measurement (absent without /proc/stat). */
  othersCpus?: number;
  /** Median over the figures of (max ÷ min − 1) of their repeated runs, and how many figures. */
  medianSpread?: number;
  figures?: number;
}

export interface HardwareProfile {
  version: typeof HARDWARE_PROFILE_VERSION;
  /** Short name shown in plans and UI, e.g. 'rtx-a4000+ryzen9-7950x' or 'this machine'. */
  name: string;
  cpu: CpuProfile;
  memory: {
    totalBytes: number;
    availableBytes: number;
    /**
     * Most host memory the plan may page-lock (pinned, cudaHostAlloc) for streamed weights;
     * absent = no limit beyond availableBytes. Drivers and OSes cap it (e.g. WSL2, ulimit -l).
     */
    pinnedLimitBytes?: number;
  };
  /** Absent on machines without a usable accelerator. */
  gpu?: GpuProfile;
  /** Absent when there is no GPU. */
  link?: LinkProfile;
  nvme?: NvmeProfile;
  source: ProfileSource;
  /** What the profiler could not measure and why (e.g. "no Vulkan device: no driver found"). */
  notes?: string[];
}
