// Checks a HardwareProfile read from JSON (a --hardware FILE or the profiler's cache); errors name
// the field.

import { HARDWARE_PROFILE_VERSION, type HardwareProfile } from './types';

function num(v: unknown, where: string, min = 0, max = 1e18): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) throw new Error(`${where} must be a number in [${min}, ${max}], got ${JSON.stringify(v)}`);
  return v;
}

function obj(v: unknown, where: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`${where} must be an object`);
  return v as Record<string, unknown>;
}

export function validateProfile(raw: unknown, where = 'hardware profile'): HardwareProfile {
  const p = obj(raw, where);
  if (p.version !== HARDWARE_PROFILE_VERSION) throw new Error(`${where}: version must be ${HARDWARE_PROFILE_VERSION}, got ${JSON.stringify(p.version)}`);
  if (typeof p.name !== 'string') throw new Error(`${where}: name must be a string`);
  const cpu = obj(p.cpu, `${where}: cpu`);
  num(cpu.cores, `${where}: cpu.cores`, 1, 1e5);
  num(cpu.threads, `${where}: cpu.threads`, 1, 1e5);
  obj(cpu.isa, `${where}: cpu.isa`);
  if (!Array.isArray(cpu.kernels)) throw new Error(`${where}: cpu.kernels must be an array`);
  cpu.kernels.forEach((k: unknown, i: number) => {
    const r = obj(k, `${where}: cpu.kernels[${i}]`);
    if (r.kernel !== 'gemv' && r.kernel !== 'gemm') throw new Error(`${where}: cpu.kernels[${i}].kernel must be 'gemv' or 'gemm'`);
    if (typeof r.format !== 'string') throw new Error(`${where}: cpu.kernels[${i}].format must be a string`);
    num(r.threads, `${where}: cpu.kernels[${i}].threads`, 1, 1e5);
    if (r.gbps !== undefined) num(r.gbps, `${where}: cpu.kernels[${i}].gbps`, 0, 1e6);
    if (r.gflops !== undefined) num(r.gflops, `${where}: cpu.kernels[${i}].gflops`, 0, 1e9);
  });
  if (!Array.isArray(cpu.attention)) throw new Error(`${where}: cpu.attention must be an array`);
  cpu.attention.forEach((a: unknown, i: number) => {
    const r = obj(a, `${where}: cpu.attention[${i}]`);
    num(r.kvLength, `${where}: cpu.attention[${i}].kvLength`, 1, 1e9);
    num(r.gbps, `${where}: cpu.attention[${i}].gbps`, 1e-6, 1e6);
  });
  const mem = obj(cpu.memory, `${where}: cpu.memory`);
  num(mem.readGBps, `${where}: cpu.memory.readGBps`, 1e-3, 1e6);
  num(mem.copyGBps, `${where}: cpu.memory.copyGBps`, 0, 1e6);
  num(cpu.contentionFactor, `${where}: cpu.contentionFactor`, 1, 100);
  num(cpu.peakGflops, `${where}: cpu.peakGflops`, 1e-3, 1e9);
  if (cpu.calibration !== undefined) {
    const k = obj(cpu.calibration, `${where}: cpu.calibration`);
    num(k.gemvScale, `${where}: cpu.calibration.gemvScale`, 1e-3, 1e3);
    num(k.gemmScale, `${where}: cpu.calibration.gemmScale`, 1e-3, 1e3);
    if (k.opOverheadUs !== undefined) num(k.opOverheadUs, `${where}: cpu.calibration.opOverheadUs`, 0, 1e5);
  }
  const m = obj(p.memory, `${where}: memory`);
  num(m.totalBytes, `${where}: memory.totalBytes`);
  num(m.availableBytes, `${where}: memory.availableBytes`);
  if (m.pinnedLimitBytes !== undefined) num(m.pinnedLimitBytes, `${where}: memory.pinnedLimitBytes`);
  if (p.gpu !== undefined) {
    const g = obj(p.gpu, `${where}: gpu`);
    num(g.memoryBytes, `${where}: gpu.memoryBytes`, 1);
    num(g.fp16Tflops, `${where}: gpu.fp16Tflops`, 1e-6, 1e6);
    num(g.memoryGBps, `${where}: gpu.memoryGBps`, 1e-3, 1e6);
    const e = obj(g.efficiency, `${where}: gpu.efficiency`);
    for (const k of ['gemm', 'gemv', 'attention']) num(e[k], `${where}: gpu.efficiency.${k}`, 1e-6, 1);
    num(g.launchOverheadUs, `${where}: gpu.launchOverheadUs`, 0, 1e6);
    num(g.reservedBytes, `${where}: gpu.reservedBytes`);
    if (g.gds !== undefined && typeof g.gds !== 'boolean') throw new Error(`${where}: gpu.gds must be true or false`);
    if (g.kvFormats !== undefined && (!Array.isArray(g.kvFormats) || g.kvFormats.length === 0 || !g.kvFormats.every((f: unknown) => typeof f === 'string'))) {
      throw new Error(`${where}: gpu.kvFormats must be a non-empty array of KV format names (e.g. ["F16"])`);
    }
    if (g.measuredOn !== undefined) {
      const m = obj(g.measuredOn, `${where}: gpu.measuredOn`);
      if (m.api !== 'vulkan') throw new Error(`${where}: gpu.measuredOn.api must be 'vulkan', got ${JSON.stringify(m.api)}`);
      for (const k of ['device', 'type']) if (typeof m[k] !== 'string') throw new Error(`${where}: gpu.measuredOn.${k} must be a string`);
      if (typeof m.software !== 'boolean') throw new Error(`${where}: gpu.measuredOn.software must be true or false`);
    }
    if (g.kernels !== undefined) {
      if (!Array.isArray(g.kernels)) throw new Error(`${where}: gpu.kernels must be an array`);
      g.kernels.forEach((k: unknown, i: number) => {
        const r = obj(k, `${where}: gpu.kernels[${i}]`);
        if (typeof r.format !== 'string') throw new Error(`${where}: gpu.kernels[${i}].format must be a string`);
        num(r.gemvGBps, `${where}: gpu.kernels[${i}].gemvGBps`, 1e-9, 1e6);
        num(r.gemmTflops, `${where}: gpu.kernels[${i}].gemmTflops`, 1e-12, 1e6);
      });
    }
    if (p.link === undefined) throw new Error(`${where}: a profile with a gpu needs a link`);
  }
  if (p.link !== undefined) {
    const l = obj(p.link, `${where}: link`);
    for (const k of ['h2dPinnedGBps', 'h2dPageableGBps', 'd2hPinnedGBps', 'd2hPageableGBps']) num(l[k], `${where}: link.${k}`, 1e-6, 1e5);
    num(l.latencyUs, `${where}: link.latencyUs`, 0, 1e6);
    if (l.pcieGen !== undefined) num(l.pcieGen, `${where}: link.pcieGen`, 1, 10);
    if (l.pcieLanes !== undefined) num(l.pcieLanes, `${where}: link.pcieLanes`, 1, 32);
  }
  if (p.nvme !== undefined) {
    const n = obj(p.nvme, `${where}: nvme`);
    num(n.devices, `${where}: nvme.devices`, 1, 1024);
    num(n.readGBps, `${where}: nvme.readGBps`, 1e-6, 1e5);
  }
  const s = obj(p.source, `${where}: source`);
  if (s.kind !== 'measured' && s.kind !== 'preset') throw new Error(`${where}: source.kind must be 'measured' or 'preset'`);
  if (s.unsettled !== undefined && typeof s.unsettled !== 'string') throw new Error(`${where}: source.unsettled must be a string (why the probes disagreed)`);
  if (cpu.calibration !== undefined && (cpu.calibration as Record<string, unknown>).agreed !== undefined && typeof (cpu.calibration as Record<string, unknown>).agreed !== 'boolean') {
    throw new Error(`${where}: cpu.calibration.agreed must be true or false`);
  }
  return p as unknown as HardwareProfile;
}

/**
 * Why a profile's figures are noise-prone, or undefined: its repeated probes disagreed beyond
 * their noise (source.unsettled, set by the profiler) or its calibration runs did (a profile file
 * written by hand or by an older engine carries only the latter). The cache refuses such a
 * profile; one passed as a file or used for the run that measured it is planned with, and the
 * plan's cost source says so (engine/cost/model.ts) instead of skewing plans silently.
 */
export function profileNoise(p: HardwareProfile): string | undefined {
  if (p.source.unsettled) return p.source.unsettled;
  if (p.cpu.calibration?.agreed === false) return `its calibration runs disagreed (${p.cpu.calibration.runs} runs)`;
  return undefined;
}
