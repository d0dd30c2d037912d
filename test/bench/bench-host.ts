// The host a benchmark ran on, as every benchmark prints it first: CPU model, the instruction-set
// flags that matter to the kernels, logical CPUs and the load average (a loaded host's figures
// say so), and a short hash of the whole flag list, which keys the peer history (peer-history.ts):
// two hosts with the same model name but different flags (a VM that hides AVX-512) are different.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';

/** Flags printed in the CPU line: the ones the kernels of either engine choose between. */
const SHOWN_FLAGS = ['avx2', 'fma', 'f16c', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'avx_vnni', 'amx_tile', 'amx_int8', 'amx_bf16'];

export interface HostCpu {
  model: string;
  /** Every flag of the first processor in /proc/cpuinfo, in its order. */
  flags: string[];
  /** The first 12 hex digits of sha256 over the sorted flags, space-joined. */
  flagsHash: string;
  logicalCpus: number;
}

/** sha256 (12 hex digits) of a flag list: order-free, so the same set always hashes the same. */
export function flagsHash(flags: readonly string[]): string {
  return createHash('sha256').update([...new Set(flags)].sort().join(' ')).digest('hex').slice(0, 12);
}

/** Model and flags from the text of /proc/cpuinfo. */
export function parseCpuInfo(text: string): { model: string; flags: string[] } {
  const model = /^model name\s*:(.*)$/m.exec(text)?.[1]?.trim() ?? 'unknown CPU';
  const flags = /^flags\s*:(.*)$/m.exec(text)?.[1]?.trim().split(/\s+/).filter(Boolean) ?? [];
  return { model, flags };
}

export function hostCpu(): HostCpu {
  const { model, flags } = parseCpuInfo(readFileSync('/proc/cpuinfo', 'utf8'));
  return { model, flags, flagsHash: flagsHash(flags), logicalCpus: os.cpus().length };
}

/** "CPU: <model> (<flags that matter>), N logical CPUs, flags sha256 <hash>; load average a b c". */
export function cpuLine(cpu: HostCpu = hostCpu()): string {
  const shown = SHOWN_FLAGS.filter((f) => cpu.flags.includes(f));
  return `CPU: ${cpu.model} (${shown.join(' ')}), ${cpu.logicalCpus} logical CPUs, flags sha256 ${cpu.flagsHash}; load average ${loadAverage()}`;
}

export function loadAverage(): string {
  return os.loadavg().map((l) => l.toFixed(2)).join(' ');
}
