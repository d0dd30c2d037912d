// `--hardware this`: the measured profile of this machine, from the profiler's cache
// (engine/hardware/cache.ts, written by `fulcrum profile`).
//
// Decision: no silent fallback to a guessed profile — a plan for "this machine" built from
// guesses would look authoritative and be wrong. Without a cached profile the request fails with
// a message that says how to make one (`fulcrum profile`) or which preset to use instead.

import { loadCachedProfile } from './cache';
import type { HardwareProfile } from './types';

export class NoProfileError extends Error {}

export function loadThisProfile(): HardwareProfile {
  const p = loadCachedProfile();
  if (!p) {
    throw new NoProfileError('no measured hardware profile for this machine (none cached, or stale after a hardware or version change): run `fulcrum profile` first, or pass --hardware PRESET (see `fulcrum presets`)');
  }
  return p;
}
