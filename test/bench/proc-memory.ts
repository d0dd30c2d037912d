// What this process holds in memory, from Linux's /proc/self: resident set now and at its peak
// (status), split into anonymous and file-backed pages, and per mapping (smaps), so a benchmark
// can say how each engine's peak is made up. Linux only: elsewhere the readers throw, naming
// the file they could not read.
import { readFileSync, realpathSync } from 'node:fs';

const KIB = 1024;

function readProc(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`memory measurement needs Linux's ${file}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** "Name:   1234 kB" lines of a /proc file, in bytes. */
function kbFields(text: string, file: string, names: readonly string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\w+):\s+(\d+) kB$/.exec(line);
    if (m && names.includes(m[1]!)) out.set(m[1]!, Number(m[2]) * KIB);
  }
  for (const n of names) if (!out.has(n)) throw new Error(`${file}: no '${n}' line`);
  return out;
}

export interface ResidentSet {
  /** VmRSS: resident now. */
  rss_bytes: number;
  /** VmHWM: the largest VmRSS since the process started. */
  peak_rss_bytes: number;
  /** RssAnon: heap, anonymous mmaps (weight copies, KV caches), stacks. */
  anon_bytes: number;
  /** RssFile: pages of mapped files (the model file, node, shared libraries). */
  file_bytes: number;
  /** RssShmem: shared memory. */
  shmem_bytes: number;
}

export function residentSet(): ResidentSet {
  const file = '/proc/self/status';
  const f = kbFields(readProc(file), file, ['VmRSS', 'VmHWM', 'RssAnon', 'RssFile', 'RssShmem']);
  return {
    rss_bytes: f.get('VmRSS')!,
    peak_rss_bytes: f.get('VmHWM')!,
    anon_bytes: f.get('RssAnon')!,
    file_bytes: f.get('RssFile')!,
    shmem_bytes: f.get('RssShmem')!,
  };
}

export interface AnonMapping {
  /** Virtual size and resident bytes of one anonymous mapping. */
  size_bytes: number;
  rss_bytes: number;
  /** Of rss_bytes, how much is in transparent 2 MiB pages. */
  huge_bytes: number;
}

export interface MappingBreakdown extends ResidentSet {
  /** Resident pages of mappings of the model file. */
  model_file_bytes: number;
  /** Resident file pages of everything else: node, its libraries, the addons. */
  other_file_bytes: number;
  /** Anonymous pages in transparent huge pages (AnonHugePages, all mappings). */
  anon_huge_bytes: number;
  /** The largest anonymous mappings by resident bytes (weight arenas, KV caches, repacked weights). */
  largest_anon: AnonMapping[];
}

interface Mapping {
  path: string;
  size: number;
  rss: number;
  anon: number;
  huge: number;
}

function parseSmaps(text: string): Mapping[] {
  const maps: Mapping[] = [];
  let cur: Mapping | undefined;
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      cur = { path: head[3]!, size: Number(BigInt(`0x${head[2]}`) - BigInt(`0x${head[1]}`)), rss: 0, anon: 0, huge: 0 };
      maps.push(cur);
      continue;
    }
    const m = /^(\w+):\s+(\d+) kB$/.exec(line);
    if (!m || !cur) continue;
    const bytes = Number(m[2]) * KIB;
    if (m[1] === 'Rss') cur.rss = bytes;
    else if (m[1] === 'Anonymous') cur.anon = bytes;
    else if (m[1] === 'AnonHugePages') cur.huge = bytes;
  }
  return maps;
}

/** The resident set now, with the model file's pages and the big anonymous mappings apart. */
export function mappingBreakdown(modelFile: string, largest = 4): MappingBreakdown {
  const rs = residentSet();
  const model = realpathSync(modelFile);
  const maps = parseSmaps(readProc('/proc/self/smaps'));
  const modelBytes = maps.filter((m) => m.path === model).reduce((s, m) => s + m.rss, 0);
  // Anonymous mappings have no path ([heap] and [stack] are named but anonymous too).
  const anon = maps.filter((m) => m.path === '' || m.path === '[heap]').sort((a, b) => b.rss - a.rss);
  return {
    ...rs,
    model_file_bytes: modelBytes,
    other_file_bytes: rs.file_bytes - modelBytes,
    anon_huge_bytes: maps.reduce((s, m) => s + m.huge, 0),
    largest_anon: anon.slice(0, largest).map((m) => ({ size_bytes: m.size, rss_bytes: m.rss, huge_bytes: m.huge })),
  };
}
