// The server's side of measured feedback (issue 21 item 4): each loaded engine folds its steps
// into the correction persisted beside this machine's cached profile; a disagreement of more than
// 25 % is logged, sent to the client (fulcrum/feedback: the status bar shows it) and queues a
// background re-measure of the profile's calibration, at most once per interval, which runs only
// while the engine evaluates nothing (every evaluation tells it: onEvaluation).
import { describeDisagreement, MeasuredCorrection, type Disagreement } from '../cost/feedback';
import { readFeedback, writeFeedback } from '../cost/feedback-store';
import { loadCachedProfile } from '../hardware/cache';
import { BackgroundRemeasure, reprofile } from '../profile/remeasure';
import { noisyProfileInUse, onNoisyProfile } from '../profile/profiler';
import { profileNoise } from '../hardware/validate';
import type { HardwareProfile } from '../hardware/types';
import type { RuntimeFeedbackOptions } from '../runtime/feedback';
import type { FeedbackParams } from './protocol';

export interface FeedbackEvents {
  onFeedback?: (p: FeedbackParams) => void;
  onLog?: (message: string) => void;
}

/** Only CPU figures have a calibration run to repeat; device and link figures need `fulcrum profile`. */
const RECALIBRATED = /^cpu matmul /;

export class ServerFeedback {
  private readonly remeasure: BackgroundRemeasure;
  /** Re-measures a noisy profile whole (not only its calibration), also only while idle. */
  private readonly reprofile: BackgroundRemeasure;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly events: FeedbackEvents, remeasure?: BackgroundRemeasure, private readonly cachedProfile: () => HardwareProfile | undefined = loadCachedProfile,
    reprofiler?: BackgroundRemeasure, private readonly noisyProfile: () => HardwareProfile | undefined = noisyProfileInUse,
  ) {
    this.remeasure = remeasure ?? new BackgroundRemeasure();
    // Decision: the noisy profile is the one in use until the re-measure replaces it, so it is
    // re-measured without the 10-minute interval's wait at first, then at most once per interval.
    this.reprofile = reprofiler ?? new BackgroundRemeasure(reprofile);
    this.unsubscribe = onNoisyProfile((p) => this.noisy(p));
  }

  /**
   * A profile measured on a busy machine (or whose probes disagreed) is in use: said in the log
   * and the status bar as the 25 % disagreement is, and measured again when the engine is idle.
   */
  noisy(profile: HardwareProfile): void {
    const why = profileNoise(profile) ?? 'its probes disagreed';
    const remeasure = this.reprofile.request(profile, (r) => {
      if (r instanceof Error) { this.send({ message: `noisy profile re-measure failed: ${r.message}`, disagreements: [], remeasure: 'failed' }); return; }
      this.send({ message: `noisy profile ${r.note}`, disagreements: [], remeasure: 'done' });
    });
    const next = remeasure === 'started' ? 're-measuring it in the background while the engine is idle'
      : remeasure === 'running' ? 'a re-measure is running' : 'it was re-measured a short while ago';
    this.send({ message: `the profile in use is noisy, plans made with it may be skewed (not cached): ${why} (${next})`, disagreements: [], remeasure, noisyProfile: why });
  }

  /** Feedback options for the next engine load (off when this machine has no cached profile). */
  options(): RuntimeFeedbackOptions | undefined {
    let profile: HardwareProfile | undefined;
    try { profile = this.cachedProfile(); } catch { profile = undefined; }
    // No cached profile: the noisy one this process measured is what the engine plans with.
    profile ??= this.noisyProfile();
    if (!profile) return undefined;
    const p = profile;
    const found = readFeedback(p);
    if (found.status === 'stale') this.events.onLog?.(`measured feedback: starting over (${found.reason})`);
    const correction = found.status === 'hit' ? found.correction : new MeasuredCorrection();
    return {
      correction, profile: p,
      persist: (c) => {
        try { writeFeedback(p, c); } catch (e) { this.events.onLog?.(`measured feedback: not saved (${(e as Error).message})`); }
      },
      onDisagreement: (d) => this.disagreed(p, correction, d),
      onEvaluation: () => { this.remeasure.activity(); this.reprofile.activity(); },
    };
  }

  private disagreed(profile: HardwareProfile, correction: MeasuredCorrection, found: Disagreement[]): void {
    const lines = found.map(describeDisagreement);
    const affected = found.filter((d) => RECALIBRATED.test(d.key));
    let remeasure: FeedbackParams['remeasure'] = 'not possible';
    if (affected.length) {
      remeasure = this.remeasure.request(profile, (r) => {
        if (r instanceof Error) {
          this.send({ message: `profile re-measure failed: ${r.message}`, disagreements: [], remeasure: 'failed' });
          return;
        }
        // The profile's CPU figures changed: what was learned against the old ones starts over.
        if (r.cached) correction.reset((k) => RECALIBRATED.test(k));
        this.send({ message: `profile ${r.note}`, disagreements: [], remeasure: 'done' });
      });
    }
    const why = remeasure === 'started' ? 're-measuring the profile\'s calibration in the background while the engine is idle'
      : remeasure === 'running' ? 'a re-measure is running' : remeasure === 'too soon' ? 'the profile was re-measured a short while ago'
      : 'device and link figures are re-measured by `fulcrum profile`';
    this.send({
      message: `measured steps disagree with the profile by more than 25 %: ${lines.join('; ')} (${why})`,
      disagreements: found.map((d) => ({ key: d.key, ratio: d.ratio, measuredMs: d.measuredMs, predictedMs: d.predictedMs, steps: d.steps })),
      remeasure,
    });
  }

  private send(p: FeedbackParams): void {
    this.events.onLog?.(`measured feedback: ${p.message}`);
    this.events.onFeedback?.(p);
  }

  stop(): void {
    this.unsubscribe();
    this.reprofile.stop();
    this.remeasure.stop();
  }
}
