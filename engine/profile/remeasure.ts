// Re-measuring a profile in the background when executed steps disagree with it (issue 21 item
// 4): the profiler's own calibration run (engine/profile/calibration-run.ts) fits the CPU rates
// again; a result whose runs agree replaces the cached profile, one whose runs disagree is not
// cached (the measured correction keeps covering the gap). At most one run at a time and one per
// interval; the caller never waits for it, and it runs only while the engine is idle (serving
// goes on, at full speed).
import { calibrateCpu, calibrationDisagreement } from './calibration-run';
import { writeCachedProfile } from '../hardware/cache';
import { currentFingerprint } from '../hardware/machine';
import { profileConfig } from '../hardware/profile-config';
import { availableMemoryBytes, lastLevelCacheBytes, runProfile } from './profiler';
import type { HardwareProfile } from '../hardware/types';

export interface RemeasureResult {
  profile: HardwareProfile;
  /** Whether the re-measured profile replaced the cached one. */
  cached: boolean;
  /** What changed, in words (for the log and the status bar). */
  note: string;
}

export type RemeasureRun = (profile: HardwareProfile, signal: AbortSignal) => Promise<RemeasureResult>;

/** Decision: at most one background re-measure per 10 minutes (a calibration run takes ~10 s of the CPU). */
export const REMEASURE_INTERVAL_MS = 10 * 60_000;

/**
 * Decision: a re-measure runs only after the engine has evaluated nothing for this long, and a
 * step that starts while it runs stops it (it is run again at the next idle moment). Run beside
 * the user's completions it took the CPU from them (a 13-token completion took 5.7 s instead of
 * 0.1 s) and measured a shared CPU, so its own runs disagreed and were not cached.
 */
export const REMEASURE_IDLE_MS = 5_000;

/** 'started': queued, runs at the next idle moment; 'running': one is queued or runs already. */
export type RemeasureStart = 'started' | 'running' | 'too soon';

interface Queued { profile: HardwareProfile; done: (r: RemeasureResult | Error) => void }

export class BackgroundRemeasure {
  private lastStart = -Infinity;
  private lastActivity = -Infinity;
  private queued: Queued | undefined;
  private running: AbortController | undefined;
  /** The running re-measure was stopped because the engine evaluated a step. */
  private yielded = false;
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** Times the re-measure gave way to the engine's own work (for tests and the log). */
  yields = 0;

  constructor(
    private readonly run: RemeasureRun = recalibrate,
    private readonly intervalMs = REMEASURE_INTERVAL_MS,
    private readonly now: () => number = () => Date.now(),
    private readonly idleMs = REMEASURE_IDLE_MS,
  ) {}

  /**
   * Queues a re-measure of `profile` unless one is queued or runs, or one started less than the
   * interval ago. Returns at once; `done` is told the result (or the error) later.
   */
  request(profile: HardwareProfile, done: (r: RemeasureResult | Error) => void): RemeasureStart {
    if (this.running || this.queued) return 'running';
    if (this.now() - this.lastStart < this.intervalMs) return 'too soon';
    this.lastStart = this.now();
    this.queued = { profile, done };
    this.schedule();
    return 'started';
  }

  /** The engine evaluated a step: a running re-measure stops and waits for the next idle moment. */
  activity(): void {
    this.lastActivity = this.now();
    if (this.running && !this.yielded) {
      this.yielded = true;
      this.yields++;
      this.running.abort();
    }
    if (this.queued) this.schedule();
  }

  /** Stops a queued or running re-measure (the engine is disposed, the server shuts down). */
  stop(): void {
    this.running?.abort();
    this.running = undefined;
    this.queued = undefined;
    this.clearTimer();
  }

  private clearTimer(): void {
    if (this.timer === undefined) return;
    if ('refresh' in this.timer) clearTimeout(this.timer); else clearImmediate(this.timer as NodeJS.Immediate);
    this.timer = undefined;
  }

  /** Starts the queued run once the engine has been idle for idleMs (on a later turn, never inside the caller). */
  private schedule(): void {
    this.clearTimer();
    const wait = this.lastActivity + this.idleMs - this.now();
    if (wait > 0) {
      const t = setTimeout(() => this.startQueued(), wait);
      t.unref();
      this.timer = t;
    } else {
      this.timer = setImmediate(() => this.startQueued());
    }
  }

  private startQueued(): void {
    this.clearTimer();
    const q = this.queued;
    if (!q || this.running) return;
    if (this.now() - this.lastActivity < this.idleMs) { this.schedule(); return; }
    this.queued = undefined;
    const ac = new AbortController();
    this.running = ac;
    this.yielded = false;
    this.run(q.profile, ac.signal).then(
      (r) => { this.running = undefined; q.done(r); },
      (e: unknown) => {
        const yielded = this.running === ac && this.yielded;
        if (this.running === ac) this.running = undefined;
        if (yielded) { this.queued = q; this.schedule(); return; }
        q.done(e instanceof Error ? e : new Error(String(e)));
      },
    );
  }
}

/** The profiler's calibration run on `profile` (quick configuration), cached when its runs agree. */
export async function recalibrate(profile: HardwareProfile, signal: AbortSignal): Promise<RemeasureResult> {
  const machine = currentFingerprint();
  const c = profileConfig({ physicalCores: machine.facts.physicalCores, llcBytes: lastLevelCacheBytes(), availableBytes: availableMemoryBytes() }, true).calibration;
  if (!c) throw new Error('re-measure: this machine\'s profile configuration has no calibration run');
  const before = profile.cpu.calibration;
  const calibration = await calibrateCpu(profile, c, signal);
  const why = calibrationDisagreement(calibration);
  const source = { ...profile.source, measuredAt: new Date().toISOString() };
  delete source.unsettled;
  const updated: HardwareProfile = { ...profile, cpu: { ...profile.cpu, calibration }, source: why ? { ...source, unsettled: why } : source };
  const change = `GEMV scale ${before?.gemvScale ?? 1} → ${calibration.gemvScale}, GEMM scale ${before?.gemmScale ?? 1} → ${calibration.gemmScale}`;
  if (why) return { profile: updated, cached: false, note: `calibration re-measured (${change}) but not cached: ${why}` };
  if (profile.source.kind !== 'measured' || profile.source.fingerprint !== machine.fingerprint) {
    return { profile: updated, cached: false, note: `calibration re-measured (${change}); not cached: the profile is not this machine's measured one` };
  }
  writeCachedProfile(updated);
  return { profile: updated, cached: true, note: `calibration re-measured and cached (${change})` };
}

/**
 * A noisy profile (measured on a busy machine, engine/profile/noise.ts) measured again, the same
 * way (quick or full), at an idle moment: cached when this time the machine was quiet.
 */
export async function reprofile(profile: HardwareProfile, signal: AbortSignal): Promise<RemeasureResult> {
  const fresh = await runProfile({ quick: profile.source.quick ?? true, signal });
  if (fresh.source.unsettled) return { profile: fresh, cached: false, note: `re-measured but still noisy, not cached: ${fresh.source.unsettled}` };
  return { profile: fresh, cached: true, note: 're-measured on a quiet machine and cached: the next plans use it' };
}
