// Which threads of a measurement process did the work and on which CPUs they ran: the parent of
// `npm run bench:cpu` samples /proc/<pid>/task/*/stat of the measurement process while it runs
// its timed part (between the child's "loaded" and "done" marks), so a peer that ran one thread
// where two were asked, or two threads on one CPU, shows in the table's notes.
//
// /proc/<pid>/task/<tid>/stat: "tid (comm) state …"; after the closing parenthesis, field 14
// utime and 15 stime (clock ticks, USER_HZ = 100 on Linux) and field 39 the CPU the thread last
// ran on. A thread's CPU is counted in a sample when it used CPU time since the previous sample.
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's utime/stime (USER_HZ, fixed at 100 by Linux's ABI). */
export const USER_HZ = 100;

export interface TaskStat {
  tid: number;
  comm: string;
  state: string;
  /** utime + stime, clock ticks. */
  cpuTicks: number;
  /** CPU the thread last ran on (field 39). */
  processor: number;
}

/** Parses one /proc/<pid>/task/<tid>/stat line; the command may hold spaces and parentheses. */
export function parseTaskStat(line: string): TaskStat {
  const open = line.indexOf('(');
  const close = line.lastIndexOf(')');
  if (open < 0 || close < open) throw new Error(`not a /proc stat line: ${JSON.stringify(line.slice(0, 80))}`);
  const rest = line.slice(close + 2).trim().split(/\s+/);
  // rest[0] is field 3 (state): field n is rest[n - 3].
  const field = (n: number): number => {
    const v = Number(rest[n - 3]);
    if (!Number.isFinite(v)) throw new Error(`/proc stat line has no numeric field ${n}: ${JSON.stringify(line.slice(0, 80))}`);
    return v;
  };
  return { tid: Number(line.slice(0, open).trim()), comm: line.slice(open + 1, close), state: rest[0] ?? '?', cpuTicks: field(14) + field(15), processor: field(39) };
}

/** One thread over the sampled window. */
export interface ThreadTrack {
  tid: number;
  comm: string;
  firstTicks: number;
  lastTicks: number;
  /** Samples in which it had used CPU since the sample before, per CPU it was then on. */
  busyOn: Map<number, number>;
  /** Cpus_allowed_list of the thread (its sched_getaffinity), read when first seen. */
  affinity: string;
}

export interface BusyThread {
  tid: number;
  /** The process's main thread (tid = pid): node's JavaScript thread. */
  main: boolean;
  comm: string;
  /** CPU time over the window's wall time (1 = one CPU all the time). */
  cpuShare: number;
  /** CPUs it was seen running on, most often first, with the share of its busy samples. */
  cpus: { cpu: number; share: number }[];
  affinity: string;
}

export interface PlacementSummary {
  windowMs: number;
  samples: number;
  threadsSeen: number;
  /**
   * The whole process's CPU time over the window's wall time (/proc/<pid>/stat counts threads that
   * have ended too): how many CPUs the run really had. llama.cpp without a thread pool of its own
   * starts its workers for each graph and ends them after it, so they show here and in `others`,
   * not as busy threads.
   */
  processCpus: number;
  /** Threads that used at least BUSY_SHARE of one CPU over the window, busiest first. */
  busy: BusyThread[];
  /** Every other thread that used CPU in the window, together (short-lived workers). */
  others: { threads: number; cpuShare: number; cpus: { cpu: number; share: number }[] };
}

/** A thread using less than this share of one CPU over the window is not one of the workers. */
export const BUSY_SHARE = 0.1;

export interface PlacementWindow {
  pid: number;
  tracks: Iterable<ThreadTrack>;
  windowMs: number;
  samples: number;
  /** The process's utime + stime (clock ticks) at the window's start and end. */
  processTicks: number;
}

function cpuShares(counts: Iterable<[number, number]>): { cpu: number; share: number }[] {
  const list = [...counts];
  const total = list.reduce((a, [, n]) => a + n, 0);
  return list.sort((a, b) => b[1] - a[1] || a[0] - b[0]).map(([cpu, n]) => ({ cpu, share: n / total }));
}

/** The busy threads, the rest together, and the process's CPUs over one window. */
export function summarizePlacement(w: PlacementWindow): PlacementSummary {
  const all = [...w.tracks];
  const windowTicks = (w.windowMs / 1000) * USER_HZ;
  const share = (ticks: number) => (windowTicks > 0 ? ticks / windowTicks : 0);
  const busy: BusyThread[] = [];
  const others = { threads: 0, ticks: 0, on: new Map<number, number>() };
  for (const t of all) {
    const ticks = t.lastTicks - t.firstTicks;
    if (share(ticks) >= BUSY_SHARE) {
      busy.push({ tid: t.tid, main: t.tid === w.pid, comm: t.comm, cpuShare: share(ticks), cpus: cpuShares(t.busyOn), affinity: t.affinity });
    } else if (ticks > 0 || t.busyOn.size > 0) {
      others.threads++;
      others.ticks += ticks;
      for (const [cpu, n] of t.busyOn) others.on.set(cpu, (others.on.get(cpu) ?? 0) + n);
    }
  }
  busy.sort((a, b) => b.cpuShare - a.cpuShare || a.tid - b.tid);
  return {
    windowMs: w.windowMs, samples: w.samples, threadsSeen: all.length, processCpus: share(w.processTicks), busy,
    others: { threads: others.threads, cpuShare: share(others.ticks), cpus: cpuShares(others.on) },
  };
}

const onCpus = (cpus: { cpu: number; share: number }[]) => cpus.map((c) => `${c.cpu} (${(c.share * 100).toFixed(0)}%)`).join(' ') || '?';

/** "process 0.97 CPUs over 3.1 s (62 samples); 1 busy thread(s) of 14: main (node) 95% on CPU 1 (88%) 0 (12%) [allowed 0-1]; 3 other threads 2% on CPU 0 (100%)" */
export function formatPlacement(p: PlacementSummary): string {
  const threads = p.busy.map((b) => `${b.main ? 'main' : `thread ${b.tid}`} (${b.comm}) ${(b.cpuShare * 100).toFixed(0)}% on CPU ${onCpus(b.cpus)} [allowed ${b.affinity}]`);
  const others = p.others.threads > 0 ? `; ${p.others.threads} other thread(s) ${(p.others.cpuShare * 100).toFixed(0)}% together on CPU ${onCpus(p.others.cpus)}` : '';
  return `process ${p.processCpus.toFixed(2)} CPUs over ${(p.windowMs / 1000).toFixed(1)} s (${p.samples} samples); ` +
    `${p.busy.length} busy thread(s) of ${p.threadsSeen}${threads.length ? `: ${threads.join('; ')}` : ''}${others}`;
}

/** Samples a live process's threads every `intervalMs` between start() and stop(). */
export class ThreadSampler {
  private readonly tracks = new Map<number, ThreadTrack>();
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;
  private samples = 0;
  private firstProcessTicks: number | undefined;
  private lastProcessTicks = 0;

  constructor(private readonly pid: number, private readonly intervalMs = 50) {}

  start(): void {
    if (this.timer) return;
    this.startedAt = performance.now();
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
  }

  /** The summary of the window; undefined when start() was never called. */
  stop(): PlacementSummary | undefined {
    if (!this.timer) return undefined;
    this.sample();
    clearInterval(this.timer);
    this.timer = undefined;
    return summarizePlacement({
      pid: this.pid, tracks: this.tracks.values(), windowMs: performance.now() - this.startedAt, samples: this.samples,
      processTicks: this.lastProcessTicks - (this.firstProcessTicks ?? this.lastProcessTicks),
    });
  }

  private sample(): void {
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${this.pid}/task`);
    } catch {
      return; // the process has ended
    }
    this.samples++;
    try {
      const ticks = parseTaskStat(readFileSync(`/proc/${this.pid}/stat`, 'utf8')).cpuTicks;
      this.firstProcessTicks ??= ticks;
      this.lastProcessTicks = ticks;
    } catch {
      // ended between the listing and the read: the last sample stands
    }
    for (const name of tids) {
      let s: TaskStat;
      try {
        s = parseTaskStat(readFileSync(`/proc/${this.pid}/task/${name}/stat`, 'utf8'));
      } catch {
        continue; // the thread ended between the listing and the read
      }
      const t = this.tracks.get(s.tid);
      if (!t) {
        // A thread first seen after the first sample was created inside the window: all its time counts.
        const firstTicks = this.samples > 1 ? 0 : s.cpuTicks;
        this.tracks.set(s.tid, { tid: s.tid, comm: s.comm, firstTicks, lastTicks: s.cpuTicks, busyOn: new Map(), affinity: this.affinity(name) });
        if (s.cpuTicks > firstTicks) this.tracks.get(s.tid)!.busyOn.set(s.processor, 1);
        continue;
      }
      if (s.cpuTicks > t.lastTicks || s.state === 'R') t.busyOn.set(s.processor, (t.busyOn.get(s.processor) ?? 0) + 1);
      t.lastTicks = s.cpuTicks;
      t.comm = s.comm;
    }
  }

  private affinity(tid: string): string {
    try {
      return /^Cpus_allowed_list:\s*(\S+)/m.exec(readFileSync(`/proc/${this.pid}/task/${tid}/status`, 'utf8'))?.[1] ?? '?';
    } catch {
      return '?';
    }
  }
}
