// bench:cpu's thread sampling (test/bench/thread-placement.ts) and its reading of llama.cpp's
// loaded CPU backend from /proc/<pid>/maps (llama-cpp-bench.ts).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { cpuLibrariesInMaps } from '../bench/llama-cpp-bench';
import { formatPlacement, parseTaskStat, summarizePlacement, ThreadSampler, type ThreadTrack } from '../bench/thread-placement';

// A real line (cat's), with the command replaced by one holding a space and parentheses.
const LINE = '29534 (ggml (pool) 1) R 29532 29532 20541 0 -1 4194304 98 0 0 0 7 5 0 0 20 0 1 0 1289322 3133440 399 18446744073709551615 94606952116224 94606952136105 140729868587488 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94606952152112 94606952153728 94607008456704 140729868589596 140729868589616 140729868589616 140729868591083 0';

test('stat line: tid, command with spaces and parentheses, state, utime + stime, last CPU (field 39)', () => {
  assert.deepEqual(parseTaskStat(LINE), { tid: 29534, comm: 'ggml (pool) 1', state: 'R', cpuTicks: 12, processor: 1 });
  assert.throws(() => parseTaskStat('garbage'), /not a \/proc stat line/);
  assert.throws(() => parseTaskStat('1 (x) R 2 3'), /no numeric field 14/);
});

test('summary: busy threads have ≥ 10 % of a CPU over the window, busiest first, CPUs by how often; the rest together', () => {
  const track = (tid: number, ticks: number, busyOn: [number, number][]): ThreadTrack => ({ tid, comm: 'node', firstTicks: 10, lastTicks: 10 + ticks, busyOn: new Map(busyOn), affinity: '0-1' });
  // A 2 s window is 200 ticks; threads 103 and 104 are short-lived workers, 105 did nothing.
  const tracks = [track(100, 190, [[0, 30], [1, 10]]), track(101, 15, [[1, 2]]), track(102, 25, [[1, 4]]), track(103, 4, [[0, 1]]), track(104, 6, [[0, 1]]), track(105, 0, [])];
  const p = summarizePlacement({ pid: 100, tracks, windowMs: 2000, samples: 40, processTicks: 300 });
  assert.equal(p.threadsSeen, 6);
  assert.equal(p.processCpus, 1.5, 'process ticks over window ticks: ended threads count');
  assert.deepEqual(p.busy.map((b) => [b.tid, b.main, b.cpuShare]), [[100, true, 0.95], [102, false, 0.125]]);
  assert.deepEqual(p.busy[0]!.cpus, [{ cpu: 0, share: 0.75 }, { cpu: 1, share: 0.25 }]);
  assert.deepEqual(p.others, { threads: 3, cpuShare: 0.125, cpus: [{ cpu: 0, share: 0.5 }, { cpu: 1, share: 0.5 }] });
  assert.equal(formatPlacement(p), 'process 1.50 CPUs over 2.0 s (40 samples); 2 busy thread(s) of 6: main (node) 95% on CPU 0 (75%) 1 (25%) [allowed 0-1]; ' +
    'thread 102 (node) 13% on CPU 1 (100%) [allowed 0-1]; 3 other thread(s) 13% together on CPU 0 (50%) 1 (50%)');
});

test('sampler: a process spinning on its main thread shows it busy', async () => {
  const child = spawn(process.execPath, ['-e', 'const end = Date.now() + 900; while (Date.now() < end);'], { stdio: 'ignore' });
  const sampler = new ThreadSampler(child.pid!, 20);
  sampler.start();
  await new Promise((r) => setTimeout(r, 600));
  const p = sampler.stop()!;
  await new Promise((r) => child.on('close', r));
  const main = p.busy.find((b) => b.main);
  assert.ok(main, `main thread not busy: ${formatPlacement(p)}`);
  assert.ok(main.cpus.length > 0 && main.affinity !== '?', formatPlacement(p));
  assert.ok(p.processCpus >= main.cpuShare - 0.1, formatPlacement(p));
  assert.ok(p.samples >= 5, `${p.samples} samples`);
});

test('maps: the ggml CPU libraries mapped, each once', () => {
  const maps = [
    '7f00-7f10 r--p 00000000 08:01 1 /nm/bins/linux-x64/libggml-base.so',
    '7f10-7f20 r--p 00000000 08:01 2 /nm/bins/linux-x64/libggml-cpu-zen4.so',
    '7f20-7f30 r-xp 00010000 08:01 2 /nm/bins/linux-x64/libggml-cpu-zen4.so',
    '7f30-7f40 rw-p 00000000 00:00 0 ',
    '7f40-7f50 r--p 00000000 08:01 3 /a dir/libggml-cpu-haswell.so',
  ].join('\n');
  assert.deepEqual(cpuLibrariesInMaps(maps), ['/nm/bins/linux-x64/libggml-cpu-zen4.so', '/a dir/libggml-cpu-haswell.so']);
  assert.deepEqual(cpuLibrariesInMaps(''), []);
});
