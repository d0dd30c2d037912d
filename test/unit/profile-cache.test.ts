// The per-fingerprint profile cache: location, round trip, and every way a file goes stale.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { profileCacheDir, profileCachePath, readCachedProfile, writeCachedProfile } from '../../engine/hardware/cache';
import { HARDWARE_PROFILE_VERSION, type HardwareProfile } from '../../engine/hardware/types';

const FP = '0123456789abcdef';

function sampleProfile(fingerprint = FP): HardwareProfile {
  return {
    version: HARDWARE_PROFILE_VERSION,
    name: 'this machine (test)',
    cpu: {
      name: 'Test CPU', cores: 2, threads: 2,
      isa: { avx2: true, fma: true, f16c: true, avx512f: false, avx512vnni: false, avx512bf16: false, amx: false },
      kernels: [{ kernel: 'gemv', format: 'F16', threads: 2, tokens: 1, gbps: 12.5, spread: { min: 11, max: 13, runs: 5 } }],
      attention: [{ kvLength: 1024, threads: 2, gbps: 3.5 }],
      memory: { readGBps: 15, copyGBps: 10 },
      contentionFactor: 1.4,
      peakGflops: 50,
    },
    memory: { totalBytes: 24 * 2 ** 30, availableBytes: 20 * 2 ** 30 },
    source: { kind: 'measured', citation: 'test', fingerprint, measuredAt: '2026-01-01T00:00:00.000Z' },
  };
}

function withDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fulcrum-cache-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('cache lives under $XDG_CACHE_HOME, else ~/.cache; relative XDG paths are ignored', () => {
  assert.equal(profileCacheDir({ XDG_CACHE_HOME: '/x/cache', HOME: '/home/u' }), '/x/cache/fulcrum/profiles');
  assert.equal(profileCacheDir({ HOME: '/home/u' }), '/home/u/.cache/fulcrum/profiles');
  assert.equal(profileCacheDir({ XDG_CACHE_HOME: 'rel', HOME: '/home/u' }), '/home/u/.cache/fulcrum/profiles');
  assert.equal(profileCachePath(FP, '/c'), `/c/${FP}.json`);
  assert.throws(() => profileCachePath('../etc/passwd', '/c'), /invalid machine fingerprint/);
});

test('write then read returns the same profile; no temporary file is left behind', () => {
  withDir((dir) => {
    const p = sampleProfile();
    const file = writeCachedProfile(p, dir);
    assert.equal(file, path.join(dir, `${FP}.json`));
    const r = readCachedProfile(FP, dir);
    assert.equal(r.status, 'hit');
    if (r.status === 'hit') assert.deepEqual(r.profile, p);
    assert.deepEqual(readdirSync(dir), [`${FP}.json`]);
  });
});

test('missing file is a miss; another version, bad JSON, invalid fields or another fingerprint are stale', () => {
  withDir((dir) => {
    assert.equal(readCachedProfile(FP, dir).status, 'miss');
    const file = path.join(dir, `${FP}.json`);
    const cases: [string, RegExp][] = [
      [JSON.stringify({ ...sampleProfile(), version: HARDWARE_PROFILE_VERSION + 1 }), /profile version/],
      ['{"version": 1, "cpu": ', /not JSON/],
      [JSON.stringify({ ...sampleProfile(), cpu: { ...sampleProfile().cpu, contentionFactor: 0.5 } }), /contentionFactor/],
      [JSON.stringify(sampleProfile('fedcba9876543210')), /belongs to fingerprint/],
    ];
    for (const [text, why] of cases) {
      writeFileSync(file, text);
      const r = readCachedProfile(FP, dir);
      assert.equal(r.status, 'stale', text.slice(0, 40));
      if (r.status === 'stale') assert.match(r.reason, why);
    }
  });
});

test('only measured profiles with a fingerprint are cached, and they must validate', () => {
  withDir((dir) => {
    const preset = { ...sampleProfile(), source: { kind: 'preset' as const, citation: 'spec' } };
    assert.throws(() => writeCachedProfile(preset, dir), /only a measured profile/);
    const bad = sampleProfile();
    bad.cpu.memory.readGBps = Number.NaN;
    assert.throws(() => writeCachedProfile(bad, dir), /readGBps/);
    assert.deepEqual(readdirSync(dir), []);
  });
});

test('a profile whose calibration runs disagreed is neither written nor read back (issue 26 item 9)', () => {
  withDir((dir) => {
    // The figures of the issue: two quick profiles minutes apart fitted prefill at 1261 and 397 tok/s.
    const unsettled = sampleProfile();
    unsettled.cpu.calibration = {
      gemvScale: 0.86, gemmScale: 0.79, model: 'synthetic', format: 'Q8_0', threads: 2, promptTokens: 256, genTokens: 32,
      prefillTokensPerS: 1261, decodeTokensPerS: 105, runs: 5, agreed: false,
      prefillRunsTokensPerS: [1261, 397, 610, 480, 702], decodeRunsTokensPerS: [105, 41, 80, 66, 71],
    };
    unsettled.source.unsettled = 'calibration runs disagreed beyond their noise after 5 runs (prefill 397–1261 tok/s, decode 41–105 tok/s)';
    assert.throws(() => writeCachedProfile(unsettled, dir), /probes disagreed is not cached: calibration runs disagreed/);
    assert.deepEqual(readdirSync(dir), []);
    // One written by hand (or by an older engine) is stale: the next request measures again.
    writeFileSync(path.join(dir, `${FP}.json`), JSON.stringify(unsettled));
    const r = readCachedProfile(FP, dir);
    assert.equal(r.status, 'stale');
    if (r.status === 'stale') assert.match(r.reason, /its probes disagreed \(calibration runs disagreed/);
  });
});
