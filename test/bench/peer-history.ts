// The peer's own history for `npm run bench:cpu`: every row's llama.cpp figure per host, so a
// figure far from the peer's previous one on the same row and host is flagged and measured again
// (issue 25: a ratio is only as good as the peer's figure; a slow or misconfigured peer once made
// Fulcrum look 2x better than it was). Pure logic here; bench-cpu.ts does the I/O and measuring.
//
// File format (bench-results/peer-history.json, JSON, version in `format`):
//   {
//     "format": "fulcrum-bench-cpu-peer-history/1",
//     "hosts": {
//       "<host key>": {                      // hostKey(): "<CPU model> | flags <sha256-12> | isa <native|avx2|avx512>"
//         "cpu": "AMD EPYC 9R14 …", "flags_sha256": "0123456789ab", "isa": "native",
//         "rows": {
//           "<row key>": [                   // rowKey(): "0.5B Q4_0 1T prompt 512 gen 128"
//             { "date": "2026-11-25T10:00:00.000Z",     // newest last; at most HISTORY_KEEP entries
//               "prompt_tokens_per_s": 380.1, "gen_tokens_per_s": 99.5,   // the row's figure (median of its runs)
//               "runs": 3,                               // peer runs behind that median
//               "cpu_library": "libggml-cpu-zen4.so",    // the CPU backend that loaded (null: not seen)
//               "node_llama_cpp": "3.22.1",
//               "flagged": false }                       // it was > FLAG_LIMIT from the entry before it
//           ]
//         }
//       }
//     }
//   }
import { existsSync, readFileSync } from 'node:fs';

export const HISTORY_FORMAT = 'fulcrum-bench-cpu-peer-history/1';
/** Entries kept per row and host (older ones are dropped). */
export const HISTORY_KEEP = 20;
/** A peer figure more than this far (relative) from the previous one is flagged. */
export const FLAG_LIMIT = 0.25;
/** Re-measurements of a flagged row at most. */
export const MAX_REMEASURES = 2;

export interface PeerFigure {
  prompt_tokens_per_s: number;
  gen_tokens_per_s: number;
}

export interface HistoryEntry extends PeerFigure {
  date: string;
  runs: number;
  cpu_library: string | null;
  node_llama_cpp: string;
  flagged: boolean;
}

export interface HostHistory {
  cpu: string;
  flags_sha256: string;
  isa: string;
  rows: Record<string, HistoryEntry[]>;
}

export interface PeerHistory {
  format: string;
  hosts: Record<string, HostHistory>;
}

export interface HostId {
  cpu: string;
  flagsHash: string;
  isa: string;
}

export interface RowId {
  shape: string;
  type: string;
  threads: number;
  promptTokens: number;
  genTokens: number;
  /** Both engines' KV cache format; absent: F16 (the keys of earlier histories stay as they were). */
  kvFormat?: 'F16' | 'Q8_0';
}

export function hostKey(h: HostId): string {
  return `${h.cpu} | flags ${h.flagsHash} | isa ${h.isa}`;
}

/** The prompt and decode lengths are part of the row: prefill tok/s depends on the prompt length. */
export function rowKey(r: RowId): string {
  return `${r.shape} ${r.type} ${r.threads}T prompt ${r.promptTokens} gen ${r.genTokens}${r.kvFormat && r.kvFormat !== 'F16' ? ` kv ${r.kvFormat}` : ''}`;
}

export function emptyHistory(): PeerHistory {
  return { format: HISTORY_FORMAT, hosts: {} };
}

/** Checks a parsed history file; the error names the file and the field that is wrong. */
export function validateHistory(data: unknown, file: string): PeerHistory {
  const fail = (where: string, what: string): never => {
    throw new Error(`${file}: ${where}: ${what} (delete the file to start a new history)`);
  };
  if (typeof data !== 'object' || data === null || Array.isArray(data)) fail('top level', 'not a JSON object');
  const d = data as Record<string, unknown>;
  if (d.format !== HISTORY_FORMAT) fail('format', `expected "${HISTORY_FORMAT}", found ${JSON.stringify(d.format)}`);
  if (typeof d.hosts !== 'object' || d.hosts === null || Array.isArray(d.hosts)) fail('hosts', 'not an object');
  for (const [hk, host] of Object.entries(d.hosts as Record<string, unknown>)) {
    const h = host as Record<string, unknown>;
    if (typeof h !== 'object' || h === null) fail(`hosts["${hk}"]`, 'not an object');
    for (const f of ['cpu', 'flags_sha256', 'isa'] as const) if (typeof h[f] !== 'string') fail(`hosts["${hk}"].${f}`, 'not a string');
    if (typeof h.rows !== 'object' || h.rows === null || Array.isArray(h.rows)) fail(`hosts["${hk}"].rows`, 'not an object');
    for (const [rk, entries] of Object.entries(h.rows as Record<string, unknown>)) {
      const where = `hosts["${hk}"].rows["${rk}"]`;
      if (!Array.isArray(entries)) fail(where, 'not an array');
      (entries as unknown[]).forEach((e, i) => {
        const x = e as Record<string, unknown>;
        if (typeof x !== 'object' || x === null) fail(`${where}[${i}]`, 'not an object');
        for (const f of ['prompt_tokens_per_s', 'gen_tokens_per_s'] as const) {
          if (typeof x[f] !== 'number' || !(x[f] > 0) || !Number.isFinite(x[f])) fail(`${where}[${i}].${f}`, `must be a positive number, found ${JSON.stringify(x[f])}`);
        }
        if (typeof x.date !== 'string') fail(`${where}[${i}].date`, 'not a string');
      });
    }
  }
  return data as PeerHistory;
}

/** The history in `file`, or an empty one when the file does not exist yet. */
export function readHistory(file: string): PeerHistory {
  if (!existsSync(file)) return emptyHistory();
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${e instanceof Error ? e.message : String(e)}); delete the file to start a new history`);
  }
  return validateHistory(data, file);
}

// This row's entries on this host, oldest first (undefined: none recorded).
function rowEntries(history: PeerHistory, host: HostId, row: RowId): HistoryEntry[] | undefined {
  return history.hosts[hostKey(host)]?.rows[rowKey(row)];
}

/** The newest entry for this row on this host, or undefined. */
export function previousEntry(history: PeerHistory, host: HostId, row: RowId): HistoryEntry | undefined {
  const entries = rowEntries(history, host, row);
  return entries?.[entries.length - 1];
}

/** The spread of a row's figures on one host: how many, and the lowest and highest of each. */
export interface HistoryRange {
  figures: number;
  prefill: [number, number];
  decode: [number, number];
}

/**
 * The row's figures on this host so far (undefined without any). The flag compares with the
 * previous figure only, as issue 25 asks; the range beside it tells a reader whether a flagged
 * figure left the peer's usual spread on this host or came back into it after a slow run (on the
 * 2-vCPU Zen 3 the peer's 0.5B Q8_0 1T decode spans 13.45-19.74 tok/s over 12 full tables).
 */
export function historyRange(history: PeerHistory, host: HostId, row: RowId): HistoryRange | undefined {
  const entries = rowEntries(history, host, row);
  if (!entries?.length) return undefined;
  const span = (f: (e: HistoryEntry) => number): [number, number] => [Math.min(...entries.map(f)), Math.max(...entries.map(f))];
  return { figures: entries.length, prefill: span((e) => e.prompt_tokens_per_s), decode: span((e) => e.gen_tokens_per_s) };
}

/** Whether each figure lies within the range's lowest and highest (inclusive). */
export function withinRange(range: HistoryRange, now: PeerFigure): { prefill: boolean; decode: boolean } {
  const inside = (v: number, [lo, hi]: [number, number]) => v >= lo && v <= hi;
  return { prefill: inside(now.prompt_tokens_per_s, range.prefill), decode: inside(now.gen_tokens_per_s, range.decode) };
}

/** Relative change of each figure against the previous one (+0.30: 30 % higher now). */
export function peerDeviation(previous: PeerFigure, now: PeerFigure): { prefill: number; decode: number } {
  return {
    prefill: now.prompt_tokens_per_s / previous.prompt_tokens_per_s - 1,
    decode: now.gen_tokens_per_s / previous.gen_tokens_per_s - 1,
  };
}

/** Which figures are more than FLAG_LIMIT away from the previous ones (none without a previous one). */
export function flaggedFigures(previous: PeerFigure | undefined, now: PeerFigure, limit = FLAG_LIMIT): ('prefill' | 'decode')[] {
  if (!previous) return [];
  const d = peerDeviation(previous, now);
  // A small tolerance so that exactly 25 % (125 against 100) is not flagged by a rounding error.
  return (['prefill', 'decode'] as const).filter((k) => Math.abs(d[k]) > limit + 1e-9);
}

/**
 * Whether to measure a flagged row again: its latest measurement (the row's figure first, then
 * each re-measurement) is still flagged against the history and fewer than MAX_REMEASURES
 * re-measurements were made. A re-measurement that agrees with the history ends it.
 */
export function shouldRemeasure(previous: PeerFigure | undefined, measurements: readonly PeerFigure[], maxRemeasures = MAX_REMEASURES): boolean {
  const latest = measurements[measurements.length - 1];
  if (!latest) throw new Error('shouldRemeasure: no measurement of the row yet');
  return measurements.length - 1 < maxRemeasures && flaggedFigures(previous, latest).length > 0;
}

/** Appends the row's final figure (keeping the newest HISTORY_KEEP) and returns the history. */
export function recordEntry(history: PeerHistory, host: HostId, row: RowId, entry: HistoryEntry, keep = HISTORY_KEEP): PeerHistory {
  const hk = hostKey(host);
  const h = (history.hosts[hk] ??= { cpu: host.cpu, flags_sha256: host.flagsHash, isa: host.isa, rows: {} });
  const entries = (h.rows[rowKey(row)] ??= []);
  entries.push(entry);
  if (entries.length > keep) entries.splice(0, entries.length - keep);
  return history;
}
