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
  /** Threads that used at least BUSY_SHARE of one CPU over the window, busiest first. */
  busy: BusyThread[];
}

/** A thread using less than this share of one CPU over the window is not one of the workers. */
export const BUSY_SHARE = 0.1;

/** The busy threads of a window of `windowMs` from the tracks gathered over it. */
export function summarizePlacement(pid: number, tracks: Iterable<ThreadTrack>, windowMs: number, samples: number): PlacementSummary {
  const all = [...tracks];
  const windowTicks = (windowMs / 1000) * USER_HZ;
  const busy = all
    .map((t): BusyThread => {
      const total = [...t.busyOn.values()].reduce((a, b) => a + b, 0);
      return {
        tid: t.tid,
        main: t.tid === pid,
        comm: t.comm,
        cpuShare: windowTicks > 0 ? (t.lastTicks - t.firstTicks) / windowTicks : 0,
        cpus: [...t.busyOn].sort((a, b) => b[1] - a[1] || a[0] - b[0]).map(([cpu, n]) => ({ cpu, share: n / total })),
        affinity: t.affinity,
      };
    })
    .filter((b) => b.cpuShare >= BUSY_SHARE)
    .sort((a, b) => b.cpuShare - a.cpuShare || a.tid - b.tid);
  return { windowMs, samples, threadsSeen: all.length, busy };
}

/** "2 busy thread(s) of 14 over 3.1 s (62 samples): main (node) 97% on CPU 1 (88%) 0 (12%) [allowed 0-1]; …" */
export function formatPlacement(p: PlacementSummary): string {
  const threads = p.busy.map((b) => `${b.main ? 'main' : `thread ${b.tid}`} (${b.comm}) ${(b.cpuShare * 100).toFixed(0)}% on CPU ${b.cpus.map((c) => `${c.cpu} (${(c.share * 100).toFixed(0)}%)`).join(' ') || '?'} [allowed ${b.affinity}]`);
  return `${p.busy.length} busy thread(s) of ${p.threadsSeen} over ${(p.windowMs / 1000).toFixed(1)} s (${p.samples} samples)${threads.length ? `: ${threads.join('; ')}` : ''}`;
}

/** Samples a live process's threads every `intervalMs` between start() and stop(). */
export class ThreadSampler {
  private readonly tracks = new Map<number, ThreadTrack>();
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;
  private samples = 0;

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
    return summarizePlacement(this.pid, this.tracks.values(), performance.now() - this.startedAt, this.samples);
  }

  private sample(): void {
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${this.pid}/task`);
    } catch {
      return; // the process has ended
    }
    this.samples++;
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
