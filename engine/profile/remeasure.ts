// Re-measuring a profile in the background when executed steps disagree with it (issue 21 item
// 4): the profiler's own calibration run (engine/profile/calibration-run.ts) fits the CPU rates
// again; a result whose runs agree replaces the cached profile, one whose runs disagree is not
// cached (the measured correction keeps covering the gap). At most one run at a time and one per
// interval; the caller never waits for it (serving goes on).
import { calibrateCpu, calibrationDisagreement } from './calibration-run';
import { writeCachedProfile } from '../hardware/cache';
import { currentFingerprint } from '../hardware/machine';
import { profileConfig } from '../hardware/profile-config';
import { availableMemoryBytes, lastLevelCacheBytes } from './profiler';
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

export type RemeasureStart = 'started' | 'running' | 'too soon';

export class BackgroundRemeasure {
  private lastStart = -Infinity;
  private running: AbortController | undefined;

  constructor(
    private readonly run: RemeasureRun = recalibrate,
    private readonly intervalMs = REMEASURE_INTERVAL_MS,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /**
   * Starts a re-measure of `profile` unless one runs or one started less than the interval ago.
   * Returns at once; `done` is told the result (or the error) later.
   */
  request(profile: HardwareProfile, done: (r: RemeasureResult | Error) => void): RemeasureStart {
    if (this.running) return 'running';
    if (this.now() - this.lastStart < this.intervalMs) return 'too soon';
    this.lastStart = this.now();
    const ac = new AbortController();
    this.running = ac;
    // Started on the next turn, so the step that found the disagreement returns first.
    setImmediate(() => {
      this.run(profile, ac.signal).then((r) => done(r), (e: unknown) => done(e instanceof Error ? e : new Error(String(e))))
        .finally(() => { if (this.running === ac) this.running = undefined; });
    });
    return 'started';
  }

  /** Stops a running re-measure (the engine is disposed, the server shuts down). */
  stop(): void {
    this.running?.abort();
    this.running = undefined;
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
