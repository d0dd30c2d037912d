// The hardware profiler: runs the native microbenchmarks (native/src/bench) on this machine and
// builds its HardwareProfile: CPU GEMV/GEMM throughput per weight format and thread count,
// decode attention by KV length, memory read/copy bandwidth, the contention factor (CPU kernel
// time while a transfer runs, paper 000 §2.1), and, when a Vulkan device exists, the GPU and the
// host↔device link. Each figure is the median of timed runs after warm-ups, with min/max kept
// as its spread. Progress goes to `onProgress` (the CLI prints it; the LSP server sends
// `$/progress`); an AbortSignal stops it between runs.
import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';

import { calibrateCpu, calibrationDisagreement } from './calibration-run';
import { cpuSnapshot, noiseReading, noiseVerdict } from './noise';
import { benchAddon, type BenchAddon, type KernelBenchResult, type ThreadSamples } from '../hardware/bench-native';
import { readCachedProfile, writeCachedProfile } from '../hardware/cache';
import { cpuIsa, cpuinfoFlags } from '../hardware/fingerprint';
import { profileVulkan } from '../hardware/vulkan-profile';
import { currentFingerprint, type ThisMachine } from '../hardware/machine';
import { FORMAT_TYPE_ID, gemmRows, profileConfig, type ProfileConfig, type ProfileFormat } from '../hardware/profile-config';
import { rateOf, sig, summarize, type RateSummary } from '../hardware/stats';
import {
  HARDWARE_PROFILE_VERSION, type ContentionMeasurement, type CpuAttentionRate, type CpuCalibration, type CpuKernelRate, type CpuProfile, type GpuProfile,
  type HardwareProfile, type LinkProfile, type Spread,
} from '../hardware/types';

export type ProgressFn = (fraction: number, message: string) => void;

export interface ProfileOptions {
  /** A smaller grid (< 10 s): max thread count only, fewer sizes and runs. */
  quick?: boolean;
  onProgress?: ProgressFn;
  signal?: AbortSignal;
  /** Write the result to the per-fingerprint cache (default true). */
  writeCache?: boolean;
  /** Adjusts the measurement grid before it runs (tests shrink it to a smoke-test size). */
  tune?: (config: ProfileConfig) => ProfileConfig;
}

export class ProfileAbortedError extends Error {
  constructor() {
    super('profiling cancelled');
    this.name = 'AbortError';
  }
}

let running = false;

/**
 * A measured profile of this machine (always measures; see getProfile for the cached path).
 * One at a time per process: two concurrent profiles would disturb each other's timings.
 */
export async function runProfile(opts: ProfileOptions = {}): Promise<HardwareProfile> {
  if (running) throw new Error('a hardware profile is already being measured in this process');
  running = true;
  try {
    const p = await measure(opts);
    forgetNoisy(p);
    return p;
  } finally {
    running = false;
  }
}

async function measure(opts: ProfileOptions): Promise<HardwareProfile> {
  const started = Date.now();
  const machine = currentFingerprint();
  const bench = benchAddon();
  const shape = {
    physicalCores: machine.facts.physicalCores,
    llcBytes: lastLevelCacheBytes(),
    availableBytes: availableMemoryBytes(),
  };
  const planned = profileConfig(shape, opts.quick ?? false);
  const config = opts.tune ? opts.tune(planned) : planned;
  const run = new ProfileRun(bench, config, machine, opts);
  const before = cpuSnapshot();
  const profile = await run.execute();
  const after = cpuSnapshot();
  const durationMs = Date.now() - started;
  profile.source.durationMs = durationMs;
  // How busy the machine was (other processes' CPU time, the spread of repeated runs): a profile
  // measured on a busy machine is marked like one whose probes disagreed (engine/profile/noise.ts).
  const noise = noiseReading(before, after, spreadsOf(profile));
  profile.source.noise = noise;
  const busy = noiseVerdict(noise);
  if (busy) {
    profile.source.unsettled = profile.source.unsettled ? `${profile.source.unsettled}; ${busy}` : busy;
    (profile.notes ??= []).push(`${busy}; this profile is not cached and is re-measured when the machine is idle`);
  }
  // A profile whose probes disagreed is used for this run but not cached: the next request measures again.
  if ((opts.writeCache ?? true) && !profile.source.unsettled) writeCachedProfile(profile);
  if (profile.source.unsettled) {
    noisyInUse = profile;
    for (const l of noisyListeners) l(profile);
  }
  return profile;
}

/** Every timed figure's spread (CPU kernels, attention, memory by threads). */
function spreadsOf(p: HardwareProfile): (Spread | undefined)[] {
  return [...p.cpu.kernels.map((k) => k.spread), ...p.cpu.attention.map((a) => a.spread)];
}

/**
 * The last profile this process measured that was not cached because it is noisy (the machine was
 * busy, or its probes disagreed): reused for planning instead of measuring again on the same busy
 * machine at every load, until a quiet re-measure replaces it (engine/profile/remeasure.ts).
 */
let noisyInUse: HardwareProfile | undefined;
const noisyListeners = new Set<(p: HardwareProfile) => void>();

export function noisyProfileInUse(): HardwareProfile | undefined { return noisyInUse; }

/** Told of every noisy profile this process measures (the server reports it and re-measures it). */
export function onNoisyProfile(listener: (p: HardwareProfile) => void): () => void {
  noisyListeners.add(listener);
  return () => { noisyListeners.delete(listener); };
}

/** A later measurement was cached: the noisy one is no longer used. */
function forgetNoisy(p: HardwareProfile): void {
  if (!p.source.unsettled) noisyInUse = undefined;
}

/** This machine's profile for planning an execution: the cached one, else a quick measurement. */
export async function thisMachineProfile(): Promise<HardwareProfile> {
  return (await getProfile({ quick: true, acceptNoisy: true })).profile;
}

/**
 * This machine's profile: the cached one when it is fresh (a quick request accepts a cached full
 * profile; a full request does not accept a cached quick one), else a new measurement.
 */
export async function getProfile(opts: ProfileOptions & { refresh?: boolean; acceptNoisy?: boolean } = {}): Promise<{ profile: HardwareProfile; cached: boolean; note?: string }> {
  const fp = currentFingerprint().fingerprint;
  if (!opts.refresh) {
    const hit = readCachedProfile(fp);
    if (hit.status === 'hit' && (opts.quick || !hit.profile.source.quick)) {
      return { profile: hit.profile, cached: true };
    }
    const noisy = noisyInUse;
    // Planning takes it (acceptNoisy); a user who asks for a profile gets a new measurement.
    if (opts.acceptNoisy && noisy && noisy.source.fingerprint === fp && (opts.quick || !noisy.source.quick)) {
      return { profile: noisy, cached: false, note: `the profile measured earlier in this process, noisy (${noisy.source.unsettled}); re-measured when the machine is idle` };
    }
    const profile = await runProfile(opts);
    return { profile, cached: false, note: hit.status === 'stale' ? `re-profiled: ${hit.reason}` : undefined };
  }
  return { profile: await runProfile(opts), cached: false };
}

// ---- one profiling run ----

interface Step {
  label: string;
  /** Estimated seconds, for progress fractions. */
  weight: number;
  run: () => Promise<void>;
}

class ProfileRun {
  private readonly notes: string[] = [];
  private readonly kernels: CpuKernelRate[] = [];
  private readonly attention: CpuAttentionRate[] = [];
  private readonly readByThreads = new Map<number, { gbps: number; spread: Spread }>();
  private readonly copyByThreads = new Map<number, { gbps: number; spread: Spread }>();
  private contention: ContentionMeasurement | undefined;
  private contentionFactor = 1;
  private gpu: { gpu: GpuProfile; link: LinkProfile; notes: string[] } | undefined;
  private calibration: CpuCalibration | undefined;
  /** Why the measurement is not trusted enough to cache, when its probes disagreed. */
  private unsettled: string | undefined;
  private readonly unsupported = new Set<ProfileFormat>();

  constructor(
    private readonly bench: BenchAddon,
    private readonly config: ProfileConfig,
    private readonly machine: ThisMachine,
    private readonly opts: ProfileOptions,
  ) {}

  async execute(): Promise<HardwareProfile> {
    const signal = this.opts.signal;
    const cancelNative = () => this.bench.cancel();
    signal?.addEventListener('abort', cancelNative);
    try {
      const steps = this.steps();
      const total = steps.reduce((s, x) => s + x.weight, 0);
      let done = 0;
      for (const step of steps) {
        if (signal?.aborted) throw new ProfileAbortedError();
        this.opts.onProgress?.(done / total, step.label);
        await step.run();
        done += step.weight;
      }
      if (signal?.aborted) throw new ProfileAbortedError();
      this.opts.onProgress?.(1, 'profile complete');
      return this.assemble();
    } finally {
      signal?.removeEventListener('abort', cancelNative);
    }
  }

  private steps(): Step[] {
    const c = this.config;
    const steps: Step[] = [];
    const mb = Math.round(c.memory.bytes / 2 ** 20);
    steps.push({ label: `memory read bandwidth (${mb} MiB, threads ${c.memory.threads.join(',')})`, weight: 1.5, run: () => this.memory('read') });
    steps.push({ label: `memory copy bandwidth (${mb} MiB, threads ${c.memory.threads.join(',')})`, weight: 2, run: () => this.memory('copy') });
    for (const f of c.gemv.formats) {
      steps.push({ label: `GEMV ${f} ${c.gemv.rows}×${c.gemv.cols} (threads ${c.gemv.threads.join(',')})`, weight: 0.8, run: () => this.gemv(f) });
    }
    for (const f of c.gemm.formats) {
      for (const t of c.gemm.tokens) {
        steps.push({ label: `GEMM ${f} ${t} tokens (threads ${c.gemm.threads.join(',')})`, weight: 0.4 * c.gemm.threads.length * (1 + c.gemm.runs), run: () => this.gemm(f, t) });
      }
    }
    for (const kv of c.attention.kvLengths) {
      steps.push({ label: `decode attention, KV length ${kv}`, weight: 0.3 + kv / 8192, run: () => this.attend(kv) });
    }
    steps.push({ label: `contention: GEMV ${c.contention.format} during a host memcpy`, weight: 2, run: () => this.contend() });
    if (c.calibration) {
      const k = c.calibration;
      steps.push({ label: `calibration: executor prefill ${k.promptTokens} + decode ${k.genTokens} tokens of a synthetic model (${k.runs} run${k.runs > 1 ? 's' : ''})`, weight: 4 * k.runs, run: () => this.calibrate() });
    }
    // The GPU is the device that executes: the Vulkan device, measured through the executor's own kernels.
    if (this.machine.vulkan.available) {
      steps.push({ label: `GPU (Vulkan ${this.machine.vulkan.name}): kernels, copies and submission`, weight: 4, run: () => this.vulkan() });
    } else {
      this.notes.push(`no Vulkan device: ${this.machine.vulkan.reason ?? 'unknown reason'}`);
    }
    return steps;
  }

  /**
   * Runs last among the CPU steps: the fit needs the kernel rates it scales. A failure (no addon
   * model support, disk full) leaves the profile uncalibrated with a note, not a failed profile.
   */
  private async calibrate(): Promise<void> {
    const c = this.config.calibration;
    if (!c) return;
    try {
      this.calibration = await calibrateCpu(this.assemble(), c, this.opts.signal);
      const why = calibrationDisagreement(this.calibration);
      if (why) { this.unsettled = why; this.notes.push(`${why}; this profile is not cached — run \`fulcrum profile\` again on a quiet machine`); }
    } catch (e) {
      if (this.opts.signal?.aborted) throw new ProfileAbortedError();
      this.notes.push(`calibration: not measured (${(e as Error).message}); CPU rates are the microbenchmarks' as measured`);
    }
  }

  private async memory(kind: 'read' | 'copy'): Promise<void> {
    const c = this.config.memory;
    const call = kind === 'read' ? this.bench.memoryRead : this.bench.memoryCopy;
    // Copy moves `bytes` from one buffer to another; each of the two is half the budget.
    const bytes = kind === 'read' ? c.bytes : Math.floor(c.bytes / 2 / 2 ** 20) * 2 ** 20;
    const res = await call.call(this.bench, { bytes, threads: c.threads, warmups: c.warmups, runs: c.runs });
    const into = kind === 'read' ? this.readByThreads : this.copyByThreads;
    for (const s of completed(res)) {
      const r = rateOf(summarize(s.ns), bytes, 1e9);
      into.set(s.threads, { gbps: r.median, spread: spreadOf(r) });
    }
  }

  private async gemv(format: ProfileFormat): Promise<void> {
    const c = this.config.gemv;
    const res = await this.matmul(format, c.rows, c.cols, 1, c.threads, c, this.config.ringBytes);
    if (!res) return;
    for (const s of completed(res.byThreads)) {
      const r = rateOf(summarize(s.ns), res.bytesPerRun, 1e9);
      this.kernels.push({ kernel: 'gemv', format, threads: s.threads, tokens: 1, gbps: sig(r.median), spread: spreadOf(r) });
    }
  }

  private async gemm(format: ProfileFormat, tokens: number): Promise<void> {
    const c = this.config.gemm;
    if (this.unsupported.has(format)) return;
    const rows = gemmRows(c.cols, tokens, c.flopsPerRun);
    const res = await this.matmul(format, rows, c.cols, tokens, c.threads, c, 0);
    if (!res) return;
    for (const s of completed(res.byThreads)) {
      const t = summarize(s.ns);
      const r = rateOf(t, res.flopsPerRun, 1e9);
      const bytes = rateOf(t, res.bytesPerRun, 1e9);
      this.kernels.push({ kernel: 'gemm', format, threads: s.threads, tokens, gflops: sig(r.median), gbps: sig(bytes.median), spread: spreadOf(r) });
    }
  }

  /** undefined (with a note) when the format has no kernel in this build. */
  private async matmul(format: ProfileFormat, rows: number, cols: number, tokens: number, threads: number[],
    runs: { warmups: number; runs: number }, ringBytes: number): Promise<KernelBenchResult | undefined> {
    if (this.unsupported.has(format)) return undefined;
    try {
      return await this.bench.matmul({ type: FORMAT_TYPE_ID[format], rows, cols, tokens, threads, ringBytes, warmups: runs.warmups, runs: runs.runs });
    } catch (e) {
      const msg = (e as Error).message;
      if (!/no CPU matmul kernel/.test(msg)) throw e;
      this.unsupported.add(format);
      this.notes.push(`${format}: skipped, ${msg}`);
      return undefined;
    }
  }

  private async attend(kvLen: number): Promise<void> {
    const c = this.config.attention;
    const res = await this.bench.attention({
      kvLen, heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, threads: c.threads, ringBytes: this.config.ringBytes,
      warmups: c.warmups, runs: c.runs,
    });
    for (const s of completed(res.byThreads)) {
      const r = rateOf(summarize(s.ns), res.bytesPerRun, 1e9);
      this.attention.push({ kvLength: kvLen, threads: s.threads, gbps: sig(r.median), spread: spreadOf(r), heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim });
    }
  }

  private async contend(): Promise<void> {
    const c = this.config.contention;
    if (this.unsupported.has(c.format)) {
      this.notes.push(`contention not measured: ${c.format} has no kernel`);
      return;
    }
    const g = this.config.gemv;
    const disturb = { disturb: c.disturb, disturbBytes: c.disturbBytes, interleave: true, warmups: c.warmups, runs: c.runs };
    const gemv = await this.bench.matmul({
      type: FORMAT_TYPE_ID[c.format], rows: g.rows, cols: g.cols, tokens: 1, threads: [c.threads], ringBytes: this.config.ringBytes, ...disturb,
    });
    const m = contentionOf(gemv);
    if (!m) return;
    const ratio = contentionRatio(m, c.disturb);
    if (ratio < 1) this.notes.push(`contention: measured factor ${ratio.toFixed(3)} < 1 (noise); recorded as 1`);
    const scale = ratio / m.wallRatio;  // report times on the basis the factor uses
    this.contention = {
      kernel: 'gemv', format: c.format, threads: c.threads, aloneMs: sig(m.aloneMs), contendedMs: sig(m.aloneMs * m.wallRatio * scale),
      transfer: c.disturb, transferGBps: sig(m.transferGBps),
    };
    this.contentionFactor = sig(Math.max(1, ratio));
    this.notes.push(`contention of GEMV ${c.format} on ${c.threads}t: wall ×${m.wallRatio.toFixed(2)}${m.cpuRatio !== undefined ? `, kernel-thread CPU time ×${m.cpuRatio.toFixed(2)}` : ''}`);
    // The compute-bound side, for the record: a prefill-sized GEMM under the same transfer.
    const tokens = this.config.gemm.tokens.includes(128) ? 128 : this.config.gemm.tokens[0] ?? 128;
    const gemm = await this.bench.matmul({
      type: FORMAT_TYPE_ID[c.format], rows: gemmRows(this.config.gemm.cols, tokens, this.config.gemm.flopsPerRun / 2),
      cols: this.config.gemm.cols, tokens, threads: [c.threads], ...disturb, runs: Math.max(3, Math.ceil(c.runs / 3)),
    });
    const mg = contentionOf(gemm);
    if (mg) this.notes.push(`contention of GEMM ${c.format} ${tokens} tokens on ${c.threads}t: wall ×${mg.wallRatio.toFixed(2)}${mg.cpuRatio !== undefined ? `, kernel-thread CPU time ×${mg.cpuRatio.toFixed(2)}` : ''}`);
    if (c.disturb === 'host-memcpy') {
      this.notes.push(`contention measured with a host memcpy thread standing in for an H2D DMA (no GPU); kernels ran on ${c.threads} of ${this.machine.facts.physicalCores} cores, alternating blocks of runs without and with the copy`);
    }
  }

  private async vulkan(): Promise<void> {
    if (this.gpu) return;
    try {
      // Small tensors: a software device (lavapipe) runs a 16 MiB GEMV in tens of ms per format.
      this.gpu = profileVulkan({ bytes: (this.config.quick ? 2 : 8) * 2 ** 20, runs: this.config.quick ? 2 : 4 });
      this.notes.push(...this.gpu.notes);
    } catch (e) {
      this.notes.push(`Vulkan device present but not profiled: ${(e as Error).message}`);
    }
  }

  private assemble(): HardwareProfile {
    const facts = this.machine.facts;
    const readBest = best([...this.readByThreads.values()].map((v) => v.gbps));
    const copyBest = best([...this.copyByThreads.values()].map((v) => v.gbps));
    if (!(readBest > 0)) throw new Error('profile: memory read bandwidth was not measured');
    const byThreads = [...this.readByThreads.keys()].sort((x, y) => x - y).flatMap((t) => {
      const r = this.readByThreads.get(t);
      const c = this.copyByThreads.get(t);
      return r && c ? [{ threads: t, readGBps: sig(r.gbps), copyGBps: sig(c.gbps) }] : [];
    });
    const gemmFlops = this.kernels.filter((k) => k.kernel === 'gemm').map((k) => k.gflops ?? 0);
    const peakGflops = gemmFlops.length ? best(gemmFlops) : 0;
    if (!(peakGflops > 0)) this.notes.push('peakGflops: no GEMM was measured');
    if (!this.contention) this.notes.push('contentionFactor: not measured, recorded as 1');
    const cpu: CpuProfile = {
      name: facts.cpuModel,
      cores: facts.physicalCores,
      threads: facts.logicalCpus,
      isa: cpuIsa(cpuinfoFlags(), facts.isaLevel),
      kernels: this.kernels,
      attention: this.attention,
      memory: { readGBps: sig(readBest), copyGBps: sig(copyBest), byThreads, bufferBytes: this.config.memory.bytes },
      contentionFactor: this.contentionFactor,
      ...(this.contention ? { contention: this.contention } : {}),
      peakGflops: sig(peakGflops > 0 ? peakGflops : 1e-3),
      ...(this.calibration ? { calibration: this.calibration } : {}),
    };
    const profile: HardwareProfile = {
      version: HARDWARE_PROFILE_VERSION,
      name: `this machine (${facts.cpuModel.trim()}, ${facts.physicalCores} cores${this.gpu ? `, ${this.gpu.gpu.name}` : ''})`,
      cpu,
      memory: { totalBytes: os.totalmem(), availableBytes: availableMemoryBytes() },
      ...(this.gpu ? { gpu: this.gpu.gpu, link: this.gpu.link } : {}),
      source: {
        kind: 'measured',
        citation: `fulcrum profile${this.config.quick ? ' --quick' : ''}: native microbenchmarks, median of timed runs after warm-ups (isa ${facts.isaLevel})`,
        fingerprint: this.machine.fingerprint,
        measuredAt: new Date().toISOString(),
        quick: this.config.quick,
        ...(this.unsettled ? { unsettled: this.unsettled } : {}),
      },
      notes: this.notes,
    };
    return profile;
  }
}

export interface ContentionMeasure {
  aloneMs: number;
  contendedMs: number;
  /** Ratio of median wall times. */
  wallRatio: number;
  /** Ratio of median CPU times of the kernel's calling thread (undefined when not recorded). */
  cpuRatio?: number;
  transferGBps: number;
}

/** Slowdown of an interleaved disturbed benchmark, by wall time and by the kernel thread's CPU time. */
export function contentionOf(r: KernelBenchResult): ContentionMeasure | undefined {
  const a = completed(r.byThreads)[0];
  const b = completed(r.contendedByThreads ?? [])[0];
  if (!a || !b || !r.transfer || r.transfer.ns <= 0) return undefined;
  const aloneMs = summarize(a.ns).medianNs / 1e6;
  const contendedMs = summarize(b.ns).medianNs / 1e6;
  const cpuRatio = a.cpuNs?.length && b.cpuNs?.length ? summarize(b.cpuNs).medianNs / summarize(a.cpuNs).medianNs : undefined;
  return { aloneMs, contendedMs, wallRatio: contendedMs / aloneMs, cpuRatio, transferGBps: r.transfer.bytes / r.transfer.ns };
}

/**
 * The slowdown the profile records. A device's DMA would take no core, so wall time would be
 * right; the host memcpy stand-in is a thread that the OS time-shares with the kernel whenever the machine is
 * busier than its cores (other processes, or cores − 1 < 1), which a DMA would never cause; so
 * there the kernel thread's CPU time is used: it counts memory stalls but not preemption.
 */
export function contentionRatio(m: ContentionMeasure, transfer: 'host-memcpy'): number {
  return transfer === 'host-memcpy' && m.cpuRatio !== undefined ? m.cpuRatio : m.wallRatio;
}

function completed(samples: ThreadSamples[]): ThreadSamples[] {
  return samples.filter((s) => s.ns.length > 0);
}

function spreadOf(r: RateSummary): Spread {
  return { min: sig(r.min), max: sig(r.max), runs: r.runs };
}

function best(xs: number[]): number {
  return xs.reduce((m, x) => (x > m ? x : m), 0);
}

// ---- machine facts the config needs ----

/** The largest data/unified cache of cpu0 in bytes (Linux sysfs), or undefined. */
export function lastLevelCacheBytes(root = '/sys/devices/system/cpu/cpu0/cache'): number | undefined {
  let dirs: string[];
  try {
    dirs = readdirSync(root).filter((d) => /^index\d+$/.test(d));
  } catch {
    return undefined;
  }
  let bestBytes = 0;
  for (const d of dirs) {
    try {
      const type = readFileSync(`${root}/${d}/type`, 'utf8').trim();
      if (type === 'Instruction') continue;
      const m = /^(\d+)([KMG]?)$/.exec(readFileSync(`${root}/${d}/size`, 'utf8').trim());
      if (!m) continue;
      const bytes = Number(m[1]) * ({ '': 1, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30 } as Record<string, number>)[m[2] ?? '']!;
      if (bytes > bestBytes) bestBytes = bytes;
    } catch {
      // an index without size/type: skip it
    }
  }
  return bestBytes > 0 ? bestBytes : undefined;
}

/** MemAvailable from /proc/meminfo (Linux), else os.freemem(). */
export function availableMemoryBytes(): number {
  try {
    const m = /^MemAvailable:\s+(\d+)\s+kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    if (m) return Number(m[1]) * 1024;
  } catch {
    // not Linux
  }
  return os.freemem();
}
