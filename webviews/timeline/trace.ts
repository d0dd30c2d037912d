// Reads Chrome trace-event JSON (what fulcrum/simulate returns with trace: true, and what the
// runtime writes for a measured step) into lanes of spans. Pure, so tests can check the drawing
// against the same numbers.
import type { ChromeTrace } from '../../engine/server/protocol';

/** `section`: the process (traced stage, measured step) the span ran in, kept when lanes merge. */
export interface Span { name: string; section: string; startUs: number; durUs: number; args: Record<string, unknown> }
export interface TraceLane { key: string; section: string; lane: string; spans: Span[]; busyUs: number }
/** An instant event (a re-plan between steps), drawn as a line across its trace's lanes. */
export interface TraceMark { name: string; section: string; atUs: number; args: Record<string, unknown> }
export interface ParsedTrace { lanes: TraceLane[]; startUs: number; endUs: number; marks: TraceMark[] }

export function parseTrace(trace: ChromeTrace): ParsedTrace {
  if (!trace || !Array.isArray(trace.traceEvents)) throw new Error('not a Chrome trace: traceEvents is missing');
  const processNames = new Map<number, string>();
  const threadNames = new Map<string, string>();
  for (const e of trace.traceEvents) {
    if (e.ph !== 'M') continue;
    const name = typeof e.args?.name === 'string' ? e.args.name : undefined;
    if (name === undefined) continue;
    if (e.name === 'process_name') processNames.set(e.pid, name);
    if (e.name === 'thread_name') threadNames.set(`${e.pid}:${e.tid}`, name);
  }
  const lanes = new Map<string, TraceLane>();
  // Lanes named by metadata come first, in trace order, so idle lanes still show.
  for (const [key, lane] of threadNames) {
    const pid = Number(key.split(':')[0]);
    lanes.set(key, { key, section: processNames.get(pid) ?? `process ${pid}`, lane, spans: [], busyUs: 0 });
  }
  let startUs = Infinity;
  let endUs = -Infinity;
  for (const e of trace.traceEvents) {
    if (e.ph !== 'X' || typeof e.dur !== 'number') continue;
    const key = `${e.pid}:${e.tid}`;
    let lane = lanes.get(key);
    if (!lane) {
      lane = { key, section: processNames.get(e.pid) ?? `process ${e.pid}`, lane: `thread ${e.tid}`, spans: [], busyUs: 0 };
      lanes.set(key, lane);
    }
    lane.spans.push({ name: e.name, section: lane.section, startUs: e.ts, durUs: e.dur, args: e.args ?? {} });
    lane.busyUs += e.dur;
    startUs = Math.min(startUs, e.ts);
    endUs = Math.max(endUs, e.ts + e.dur);
  }
  if (!Number.isFinite(startUs)) { startUs = 0; endUs = 0; }
  const marks: TraceMark[] = [];
  for (const e of trace.traceEvents) {
    if (e.ph !== 'i' || typeof e.ts !== 'number') continue;
    marks.push({ name: e.name, section: processNames.get(e.pid) ?? `process ${e.pid}`, atUs: e.ts, args: e.args ?? {} });
  }
  return { lanes: [...lanes.values()], startUs, endUs, marks };
}

/**
 * One lane per lane name across sections, in the order the names first appear: a measured run
 * is one section per step (and per op list after a re-plan), each with the same few lanes, most
 * nearly empty; merged, the run reads as one CPU row, one GPU row, …, each span keeping its own
 * section for its details. `section` names the merged lanes' section.
 */
export function mergeLanesByName(lanes: TraceLane[], section: string): TraceLane[] {
  const merged = new Map<string, TraceLane>();
  for (const l of lanes) {
    let m = merged.get(l.lane);
    if (!m) {
      m = { key: `merged:${l.lane}`, section, lane: l.lane, spans: [], busyUs: 0 };
      merged.set(l.lane, m);
    }
    m.spans.push(...l.spans);
    m.busyUs += l.busyUs;
  }
  for (const m of merged.values()) m.spans.sort((a, b) => a.startUs - b.startUs);
  return [...merged.values()];
}

/** Round tick step (1-2-5 × 10^k µs) giving about `target` ticks over `spanUs`. */
export function tickStepUs(spanUs: number, target = 8): number {
  if (!(spanUs > 0)) return 1;
  const raw = spanUs / target;
  const decade = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * decade >= raw) return m * decade;
  return 10 * decade;
}

export function formatUs(us: number): string {
  const ms = us / 1000;
  if (Math.abs(ms) >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (Math.abs(ms) >= 1) return `${Number(ms.toFixed(3))} ms`;
  return `${Number(us.toFixed(1))} µs`;
}
