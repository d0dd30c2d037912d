// The profile cache: one measured HardwareProfile per machine fingerprint, as plain JSON in
// $XDG_CACHE_HOME/fulcrum/profiles/<fingerprint>.json (~/.cache/… when XDG_CACHE_HOME is unset),
// so the file can also be passed to `--hardware FILE`. A file of another profile version, of
// another fingerprint, or that does not validate is stale: the profiler measures again and
// overwrites it.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { currentFingerprint } from './machine';
import { HARDWARE_PROFILE_VERSION, type HardwareProfile } from './types';
import { validateProfile } from './validate';

export function profileCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_CACHE_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(env.HOME || os.homedir(), '.cache');
  return path.join(base, 'fulcrum', 'profiles');
}

export function profileCachePath(fingerprint: string, dir = profileCacheDir()): string {
  if (!/^[0-9a-f]{8,64}$/.test(fingerprint)) throw new Error(`invalid machine fingerprint '${fingerprint}'`);
  return path.join(dir, `${fingerprint}.json`);
}

export type CacheLookup =
  | { status: 'hit'; profile: HardwareProfile; file: string }
  | { status: 'miss'; file: string }
  | { status: 'stale'; reason: string; file: string };

/** Reads the cached profile of `fingerprint`, telling a missing file from a stale one. */
export function readCachedProfile(fingerprint: string, dir = profileCacheDir()): CacheLookup {
  const file = profileCachePath(fingerprint, dir);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return { status: 'miss', file };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return { status: 'stale', reason: `${file}: not JSON (${(e as Error).message})`, file };
  }
  const version = (raw as { version?: unknown } | null)?.version;
  if (version !== HARDWARE_PROFILE_VERSION) {
    return { status: 'stale', reason: `${file}: profile version ${JSON.stringify(version)}, this engine reads ${HARDWARE_PROFILE_VERSION}`, file };
  }
  let profile: HardwareProfile;
  try {
    profile = validateProfile(raw, file);
  } catch (e) {
    return { status: 'stale', reason: (e as Error).message, file };
  }
  if (profile.source.unsettled) {
    return { status: 'stale', reason: `${file}: its probes disagreed (${profile.source.unsettled})`, file };
  }
  if (profile.source.kind !== 'measured' || profile.source.fingerprint !== fingerprint) {
    return { status: 'stale', reason: `${file}: belongs to fingerprint ${JSON.stringify(profile.source.fingerprint)}, not ${fingerprint}`, file };
  }
  return { status: 'hit', profile, file };
}

/**
 * Writes the profile under its own fingerprint (atomically: a reader never sees half a file).
 * A profile whose repeated probes disagreed beyond their noise (source.unsettled) is refused:
 * cached, it would plan every later run with the figures of a busy minute (issue 26 item 9).
 */
export function writeCachedProfile(profile: HardwareProfile, dir = profileCacheDir()): string {
  const fp = profile.source.fingerprint;
  if (profile.source.kind !== 'measured' || !fp) throw new Error('only a measured profile with a fingerprint can be cached');
  if (profile.source.unsettled) throw new Error(`a profile whose probes disagreed is not cached: ${profile.source.unsettled}`);
  validateProfile(profile, 'profile to cache');
  const file = profileCachePath(fp, dir);
  mkdirSync(dir, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(profile, null, 2)}\n`);
  renameSync(tmp, file);
  return file;
}

/**
 * The cached measured profile of this machine, or undefined when there is none, it is stale,
 * or this machine's fingerprint cannot be taken (no native addon).
 */
export function loadCachedProfile(): HardwareProfile | undefined {
  let fp: string;
  try {
    fp = currentFingerprint().fingerprint;
  } catch {
    return undefined;
  }
  const r = readCachedProfile(fp);
  return r.status === 'hit' ? r.profile : undefined;
}
