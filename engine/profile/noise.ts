// Is a profile measured on a busy machine? (issue 21 item 4: a profile taken at load average 19
// on 2 cores made `auto` pick a plan 23 % slower than the fastest executed one, and its
// calibration runs "agreed": under steady load every run is slow by the same amount, so the
// spread of repeated runs alone does not catch it.) Two readings, either one decides:
//   - the CPU time other processes took while the profile ran (from /proc/stat, minus this
//     process's own CPU time): immediate, unlike the load average, which needs a minute to
//     follow a change and counts the profiler's own threads;
//   - the spread of the profile's repeated runs (min/max of every timed figure).
import { readFileSync } from 'node:fs';
import os from 'node:os';
import type { ProfileNoiseReading, Spread } from '../hardware/types';

/** A point-in-time reading of the machine's CPU accounting. */
export interface CpuSnapshot {
  /** Busy and total jiffies over all CPUs (undefined where /proc/stat cannot be read). */
  busy?: number;
  total?: number;
  /** This process's CPU time (all its threads, the native pool's included), µs. */
  ownUs: number;
  wallMs: number;
  loadAverage: number;
}

/** Busy and total jiffies of the aggregate `cpu` line of /proc/stat (idle and iowait are not busy). */
export function parseProcStat(text: string): { busy: number; total: number } | undefined {
  const line = text.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return undefined;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  if (f.length < 4 || f.some((x) => !Number.isFinite(x))) return undefined;
  // user nice system idle iowait irq softirq steal (guest time is already inside user/nice).
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
}

export function cpuSnapshot(): CpuSnapshot {
  let stat: { busy: number; total: number } | undefined;
  try { stat = parseProcStat(readFileSync('/proc/stat', 'utf8')); } catch { stat = undefined; }
  const u = process.cpuUsage();
  return { ...(stat ?? {}), ownUs: u.user + u.system, wallMs: performance.now(), loadAverage: os.loadavg()[0] ?? 0 };
}

/**
 * CPUs' worth of time other processes used between two snapshots: the machine's busy share times
 * its CPU count, less this process's. Undefined without /proc/stat (not Linux) or over no time.
 */
export function othersCpus(a: CpuSnapshot, b: CpuSnapshot, cpus = os.cpus().length): number | undefined {
  if (a.busy === undefined || b.busy === undefined || a.total === undefined || b.total === undefined) return undefined;
  const total = b.total - a.total;
  const wallS = (b.wallMs - a.wallMs) / 1000;
  if (!(total > 0) || !(wallS > 0)) return undefined;
  const machine = ((b.busy - a.busy) / total) * cpus;
  const own = (b.ownUs - a.ownUs) / 1e6 / wallS;
  return Math.max(0, machine - own);
}

/** Relative spread of one figure's repeated runs (max ÷ min − 1); undefined with fewer than 3 runs. */
export function relativeSpread(s: Spread | undefined): number | undefined {
  if (!s || s.runs < 3 || !(s.min > 0) || !(s.max >= s.min)) return undefined;
  return s.max / s.min - 1;
}

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export interface NoiseThresholds {
  /** Most CPUs' worth of other processes' time tolerated while profiling. */
  othersCpus: number;
  /** Most median relative spread of the repeated runs. */
  spread: number;
}

/**
 * Decisions: other processes may take at most a quarter of the machine's CPUs while it is profiled
 * (half a core on this project's 2-vCPU VMs: an editor, a language server; a build or a second
 * engine takes a whole core or more and shows here). The median figure's repeated runs may
 * spread by at most 60 %: this machine's full profile taken on a quiet host (load 1.2, 54 figures
 * with ≥ 3 runs) spread by a median of 24 % (GEMM 1–26 %, GEMV and short-KV attention 20–110 %),
 * so spread is the weaker signal and only a wide one decides. The median, not the worst, so one
 * figure disturbed by a single preemption does not condemn the profile.
 */
export function defaultThresholds(cpus = os.cpus().length): NoiseThresholds {
  return { othersCpus: Math.max(0.5, cpus / 4), spread: 0.6 };
}

/** The reading a profile records: what others took, the load average, the runs' spread. */
export function noiseReading(a: CpuSnapshot, b: CpuSnapshot, spreads: readonly (Spread | undefined)[], cpus = os.cpus().length): ProfileNoiseReading {
  const others = othersCpus(a, b, cpus);
  const rel = spreads.map(relativeSpread).filter((x): x is number => x !== undefined);
  const round = (x: number) => Number(x.toPrecision(3));
  return {
    cpus,
    loadAverage: round(Math.max(a.loadAverage, b.loadAverage)),
    ...(others !== undefined ? { othersCpus: round(others) } : {}),
    ...(rel.length ? { medianSpread: round(median(rel)), figures: rel.length } : {}),
  };
}

/** Why the reading makes the profile noisy, or undefined when it is quiet enough. */
export function noiseVerdict(r: ProfileNoiseReading, t: NoiseThresholds = defaultThresholds(r.cpus)): string | undefined {
  const why: string[] = [];
  if (r.othersCpus !== undefined && r.othersCpus > t.othersCpus) {
    why.push(`other processes used ${r.othersCpus.toFixed(2)} of ${r.cpus} CPUs while it was measured (at most ${t.othersCpus} tolerated; load average ${r.loadAverage})`);
  }
  if (r.medianSpread !== undefined && r.medianSpread > t.spread) {
    why.push(`its repeated runs spread by ${(r.medianSpread * 100).toFixed(0)} % (median of ${r.figures} figures; at most ${(t.spread * 100).toFixed(0)} % tolerated)`);
  }
  return why.length ? `measured on a busy machine: ${why.join('; ')}` : undefined;
}
