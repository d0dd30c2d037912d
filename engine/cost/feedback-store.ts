// The measured correction on disk, next to the profile it corrects: <fingerprint>.feedback.json
// in the profile cache directory. The profile file is never touched; a correction belongs to one
// measurement of the profile (its measuredAt), so re-profiling leaves the old one stale.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { profileCacheDir, profileCachePath } from '../hardware/cache';
import type { HardwareProfile } from '../hardware/types';
import { MeasuredCorrection, type FeedbackOptions, type FeedbackState } from './feedback';

export const FEEDBACK_FILE_VERSION = 1;

interface FeedbackFile extends FeedbackState {
  version: number;
  fingerprint: string;
  /** The profile measurement this corrects (HardwareProfile.source.measuredAt). */
  profileMeasuredAt: string;
  updatedAt: string;
}

/** The correction file of a measured, cached-kind profile, or undefined (presets have none). */
export function feedbackPath(profile: HardwareProfile, dir = profileCacheDir()): string | undefined {
  const fp = profile.source.fingerprint;
  if (profile.source.kind !== 'measured' || !fp || !profile.source.measuredAt) return undefined;
  return profileCachePath(fp, dir).replace(/\.json$/, '.feedback.json');
}

export type FeedbackLookup =
  | { status: 'hit'; correction: MeasuredCorrection; file: string }
  | { status: 'miss' }
  | { status: 'stale'; reason: string; file: string };

/** The persisted correction of `profile`; a file of another measurement or that does not parse is stale. */
export function readFeedback(profile: HardwareProfile, options: Partial<FeedbackOptions> = {}, dir = profileCacheDir()): FeedbackLookup {
  const file = feedbackPath(profile, dir);
  if (!file) return { status: 'miss' };
  let text: string;
  try { text = readFileSync(file, 'utf8'); } catch { return { status: 'miss' }; }
  try {
    const raw = JSON.parse(text) as Partial<FeedbackFile>;
    if (raw.version !== FEEDBACK_FILE_VERSION) return { status: 'stale', reason: `${file}: version ${JSON.stringify(raw.version)}, this engine reads ${FEEDBACK_FILE_VERSION}`, file };
    if (raw.fingerprint !== profile.source.fingerprint || raw.profileMeasuredAt !== profile.source.measuredAt) {
      return { status: 'stale', reason: `${file}: corrects the profile measured at ${JSON.stringify(raw.profileMeasuredAt)}, not the one of ${profile.source.measuredAt}`, file };
    }
    return { status: 'hit', correction: MeasuredCorrection.fromJSON(raw, file, options), file };
  } catch (e) {
    return { status: 'stale', reason: e instanceof SyntaxError ? `${file}: not JSON (${e.message})` : (e as Error).message, file };
  }
}

/** Writes the correction beside the profile (atomically); undefined when the profile has no cache file. */
export function writeFeedback(profile: HardwareProfile, c: MeasuredCorrection, dir = profileCacheDir()): string | undefined {
  const file = feedbackPath(profile, dir);
  if (!file) return undefined;
  const body: FeedbackFile = {
    version: FEEDBACK_FILE_VERSION, fingerprint: profile.source.fingerprint!, profileMeasuredAt: profile.source.measuredAt!,
    updatedAt: new Date().toISOString(), ...c.toJSON(),
  };
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(body, null, 2)}\n`);
  renameSync(tmp, file);
  return file;
}
