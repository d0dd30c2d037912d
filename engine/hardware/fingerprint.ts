// The machine fingerprint: the profiler's cache key. Paper 000 §2.1: a new configuration, CPU
// core count or frequency needs a new profile; so the key covers the CPU model, its physical
// and logical core counts, its maximum frequency, the memory size, the GPUs, and the ISA level
// the kernels dispatch to (FULCRUM_ISA can cap it, and that changes every kernel figure).
//
// Decision: memory is rounded to whole GiB and the frequency to 100 MHz, so that the kernel's
// reserved memory or a reading of the current clock (where no max frequency is published)
// does not change the key from one start to the next.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';

import type { CpuIsa } from './types';

export interface MachineFacts {
  cpuModel: string;
  physicalCores: number;
  logicalCpus: number;
  cpuMaxMHz: number;
  memoryGiB: number;
  /** The GPU the executor would use ("Vulkan NAME (TYPE)"), if any. */
  gpus: string[];
  arch: string;
  platform: string;
  isaLevel: string;
}

/** A stable 16-hex-digit hash of the facts (field order fixed here, not by the caller). */
export function fingerprintOf(f: MachineFacts): string {
  const canonical = JSON.stringify([
    f.cpuModel.trim().replace(/\s+/g, ' '), f.physicalCores, f.logicalCpus, Math.round(f.cpuMaxMHz / 100) * 100,
    Math.round(f.memoryGiB), [...f.gpus], f.arch, f.platform, f.isaLevel,
  ]);
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Physical cores from Linux's CPU topology (distinct package/core pairs among online CPUs);
 * undefined where it is not published.
 */
export function sysfsPhysicalCores(root = '/sys/devices/system/cpu'): number | undefined {
  let names: string[];
  try {
    names = readdirSync(root).filter((n) => /^cpu\d+$/.test(n));
  } catch {
    return undefined;
  }
  const cores = new Set<string>();
  for (const n of names) {
    const core = readText(`${root}/${n}/topology/core_id`);
    const pkg = readText(`${root}/${n}/topology/physical_package_id`);
    if (core === undefined || pkg === undefined) continue;  // offline CPUs have no topology
    cores.add(`${pkg.trim()}:${core.trim()}`);
  }
  return cores.size > 0 ? cores.size : undefined;
}

/** Maximum CPU frequency in MHz: cpufreq's cpuinfo_max_freq where present, else the current clock. */
export function cpuMaxMHz(root = '/sys/devices/system/cpu'): number {
  const khz = Number(readText(`${root}/cpu0/cpufreq/cpuinfo_max_freq`)?.trim());
  if (Number.isFinite(khz) && khz > 0) return khz / 1000;
  return os.cpus()[0]?.speed ?? 0;
}

/** CPU feature flags from /proc/cpuinfo (Linux); undefined elsewhere. */
export function cpuinfoFlags(text = readText('/proc/cpuinfo')): Set<string> | undefined {
  if (!text) return undefined;
  const line = text.split('\n').find((l) => /^(flags|Features)\s*:/.test(l));
  if (!line) return undefined;
  return new Set(line.slice(line.indexOf(':') + 1).trim().split(/\s+/));
}

/** The profile's ISA block: from cpuinfo flags where readable, else implied by the kernels' ISA level. */
export function cpuIsa(flags: Set<string> | undefined, isaLevel: string): CpuIsa {
  if (flags) {
    return {
      avx2: flags.has('avx2'), fma: flags.has('fma'), f16c: flags.has('f16c'), avx512f: flags.has('avx512f'),
      avx512vnni: flags.has('avx512_vnni'), avx512bf16: flags.has('avx512_bf16'),
      amx: flags.has('amx_bf16') || flags.has('amx_int8'),
    };
  }
  const avx2 = isaLevel === 'avx2' || isaLevel === 'avxvnni' || isaLevel === 'avx512';
  const avx512 = isaLevel === 'avx512';
  return { avx2, fma: avx2, f16c: avx2, avx512f: avx512, avx512vnni: avx512, avx512bf16: false, amx: false };
}

export function collectMachineFacts(opts: { gpus: string[]; isaLevel: string; physicalCores?: number }): MachineFacts {
  const cpus = os.cpus();
  const logicalCpus = cpus.length || 1;
  return {
    cpuModel: cpus[0]?.model ?? 'unknown CPU',
    physicalCores: opts.physicalCores ?? sysfsPhysicalCores() ?? logicalCpus,
    logicalCpus,
    cpuMaxMHz: cpuMaxMHz(),
    memoryGiB: os.totalmem() / 2 ** 30,
    gpus: opts.gpus,
    arch: process.arch,
    platform: process.platform,
    isaLevel: opts.isaLevel,
  };
}
