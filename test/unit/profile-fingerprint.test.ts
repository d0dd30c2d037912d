// Machine fingerprint (the profile cache key) and the CPU facts it is built from.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { cpuIsa, cpuinfoFlags, fingerprintOf, sysfsPhysicalCores, type MachineFacts } from '../../engine/hardware/fingerprint';

const base: MachineFacts = {
  cpuModel: 'Intel(R) Xeon(R) Processor', physicalCores: 2, logicalCpus: 2, cpuMaxMHz: 2600, memoryGiB: 23.4,
  gpus: [], arch: 'x64', platform: 'linux', isaLevel: 'avx512',
};

test('fingerprint is 16 hex digits and stable for the same facts', () => {
  const a = fingerprintOf(base);
  assert.match(a, /^[0-9a-f]{16}$/);
  assert.equal(fingerprintOf({ ...base, gpus: [] }), a);
});

test('fingerprint ignores whitespace in the model name, clock jitter under 50 MHz and sub-GiB memory changes', () => {
  const a = fingerprintOf(base);
  assert.equal(fingerprintOf({ ...base, cpuModel: ' Intel(R)  Xeon(R) Processor ' }), a);
  assert.equal(fingerprintOf({ ...base, cpuMaxMHz: 2630 }), a);
  assert.equal(fingerprintOf({ ...base, memoryGiB: 23.2 }), a);
});

test('fingerprint changes with core count, frequency, memory, GPUs and ISA level (paper 000 §2.1)', () => {
  const a = fingerprintOf(base);
  const variants: Partial<MachineFacts>[] = [
    { physicalCores: 4 }, { logicalCpus: 4 }, { cpuMaxMHz: 3000 }, { memoryGiB: 32 },
    { gpus: ['NVIDIA RTX A4000 (16 GiB)'] }, { isaLevel: 'avx2' }, { cpuModel: 'AMD Ryzen 9 7950X' },
  ];
  const seen = new Set([a]);
  for (const v of variants) {
    const fp = fingerprintOf({ ...base, ...v });
    assert.ok(!seen.has(fp), `fingerprint did not change for ${JSON.stringify(v)}`);
    seen.add(fp);
  }
});

test('physical cores come from distinct package/core pairs in sysfs, skipping CPUs without topology', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'fulcrum-sysfs-'));
  try {
    // 4 logical CPUs on 2 physical cores (SMT pairs), plus one offline CPU without topology.
    const cpus: [string, string, string][] = [['cpu0', '0', '0'], ['cpu1', '1', '0'], ['cpu2', '0', '0'], ['cpu3', '1', '0']];
    for (const [name, core, pkg] of cpus) {
      mkdirSync(path.join(root, name, 'topology'), { recursive: true });
      writeFileSync(path.join(root, name, 'topology', 'core_id'), `${core}\n`);
      writeFileSync(path.join(root, name, 'topology', 'physical_package_id'), `${pkg}\n`);
    }
    mkdirSync(path.join(root, 'cpu4'));
    mkdirSync(path.join(root, 'cpufreq'));
    assert.equal(sysfsPhysicalCores(root), 2);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  assert.equal(sysfsPhysicalCores('/nonexistent/fulcrum'), undefined);
});

test('ISA flags are read from cpuinfo, or implied by the kernels ISA level elsewhere', () => {
  const flags = cpuinfoFlags('processor\t: 0\nflags\t\t: fpu sse2 avx2 fma f16c avx512f avx512_vnni amx_int8\n');
  assert.ok(flags);
  assert.deepEqual(cpuIsa(flags, 'avx512'), { avx2: true, fma: true, f16c: true, avx512f: true, avx512vnni: true, avx512bf16: false, amx: true });
  assert.equal(cpuinfoFlags('processor : 0\n'), undefined);
  assert.deepEqual(cpuIsa(undefined, 'avx2'), { avx2: true, fma: true, f16c: true, avx512f: false, avx512vnni: false, avx512bf16: false, amx: false });
  assert.equal(cpuIsa(undefined, 'scalar').avx2, false);
});
