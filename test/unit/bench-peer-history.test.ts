// bench:cpu's peer history (test/bench/peer-history.ts): the host and row keys, the > 25 % flag,
// when a flagged row is measured again, and the file's validation.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { flagsHash, parseCpuInfo } from '../bench/bench-host';
import {
  emptyHistory, flaggedFigures, HISTORY_FORMAT, historyRange, hostKey, previousEntry, readHistory, recordEntry, rowKey, shouldRemeasure, validateHistory,
  withinRange,
  type HistoryEntry, type HostId, type RowId,
} from '../bench/peer-history';

const host: HostId = { cpu: 'AMD EPYC 9R14', flagsHash: flagsHash(['avx2', 'avx512f', 'avx_vnni']), isa: 'native' };
const row: RowId = { shape: '0.5B', type: 'Q4_0', threads: 1, promptTokens: 256, genTokens: 48 };
const entry = (prefill: number, decode: number, date = '2026-11-25T10:00:00.000Z'): HistoryEntry => ({
  date, prompt_tokens_per_s: prefill, gen_tokens_per_s: decode, runs: 3, cpu_library: 'libggml-cpu-zen4.so', node_llama_cpp: '3.22.1', flagged: false,
});

test('flags hash: order and repeats do not matter, any other flag does', () => {
  assert.equal(flagsHash(['avx2', 'fma', 'avx512f']), flagsHash(['avx512f', 'avx2', 'fma', 'avx2']));
  assert.notEqual(flagsHash(['avx2', 'fma', 'avx512f']), flagsHash(['avx2', 'fma']));
  assert.match(flagsHash(['avx2']), /^[0-9a-f]{12}$/);
  const parsed = parseCpuInfo('processor\t: 0\nmodel name\t: AMD EPYC 9R14 96-Core Processor\nflags\t\t: fpu avx2 avx512f\n\nprocessor\t: 1\n');
  assert.deepEqual(parsed, { model: 'AMD EPYC 9R14 96-Core Processor', flags: ['fpu', 'avx2', 'avx512f'] });
});

test('keys: CPU model, flags hash and ISA make the host; shape, type, threads, prompt and decode lengths and a non-F16 KV format the row', () => {
  assert.equal(hostKey(host), `AMD EPYC 9R14 | flags ${host.flagsHash} | isa native`);
  assert.notEqual(hostKey(host), hostKey({ ...host, isa: 'avx2' }));
  assert.notEqual(hostKey(host), hostKey({ ...host, flagsHash: flagsHash(['avx2']) }));
  assert.equal(rowKey(row), '0.5B Q4_0 1T prompt 256 gen 48');
  for (const other of [{ threads: 2 }, { promptTokens: 512 }, { genTokens: 128 }, { type: 'Q4_K_M' }, { shape: '1.3B' }, { kvFormat: 'Q8_0' as const }]) {
    assert.notEqual(rowKey({ ...row, ...other }), rowKey(row), JSON.stringify(other));
  }
  // The F16 rows keep the keys they had before the KV format was part of a row.
  assert.equal(rowKey({ ...row, kvFormat: 'F16' }), rowKey(row));
  assert.equal(rowKey({ ...row, kvFormat: 'Q8_0' }), '0.5B Q4_0 1T prompt 256 gen 48 kv Q8_0');
});

test('previous entry: the newest of the same row and host only', () => {
  const h = emptyHistory();
  assert.equal(previousEntry(h, host, row), undefined);
  recordEntry(h, host, row, entry(380, 100, 'a'));
  recordEntry(h, host, row, entry(370, 98, 'b'));
  recordEntry(h, { ...host, isa: 'avx2' }, row, entry(300, 90, 'c'));
  recordEntry(h, host, { ...row, threads: 2 }, entry(600, 150, 'd'));
  assert.equal(previousEntry(h, host, row)?.date, 'b');
  assert.equal(previousEntry(h, { ...host, isa: 'avx2' }, row)?.date, 'c');
  assert.equal(previousEntry(h, host, { ...row, threads: 2 })?.date, 'd');
  assert.equal(previousEntry(h, { ...host, cpu: 'Intel Xeon' }, row), undefined);
});

test('history range: lowest and highest of the row on this host only; where a new figure sits', () => {
  const h = emptyHistory();
  assert.equal(historyRange(h, host, row), undefined);
  recordEntry(h, host, row, entry(61.1, 13.65, 'a'));
  recordEntry(h, host, row, entry(80.9, 19.74, 'b'));
  recordEntry(h, host, row, entry(59.6, 15.49, 'c'));
  recordEntry(h, host, { ...row, threads: 2 }, entry(500, 40, 'd'));
  recordEntry(h, { ...host, isa: 'avx2' }, row, entry(10, 1, 'e'));
  const r = historyRange(h, host, row)!;
  assert.deepEqual(r, { figures: 3, prefill: [59.6, 80.9], decode: [13.65, 19.74] });
  // A figure 26 % above the previous one (13.65) but inside the row's spread, and one below it.
  assert.deepEqual(withinRange(r, { prompt_tokens_per_s: 59.9, gen_tokens_per_s: 17.24 }), { prefill: true, decode: true });
  assert.deepEqual(withinRange(r, { prompt_tokens_per_s: 40, gen_tokens_per_s: 19.74 }), { prefill: false, decode: true });
  assert.deepEqual(withinRange(r, { prompt_tokens_per_s: 80.9, gen_tokens_per_s: 25 }), { prefill: true, decode: false });
});

test('history keeps the newest entries of a row', () => {
  const h = emptyHistory();
  for (let i = 0; i < 5; i++) recordEntry(h, host, row, entry(100 + i, 50, String(i)), 3);
  assert.deepEqual(h.hosts[hostKey(host)]!.rows[rowKey(row)]!.map((e) => e.date), ['2', '3', '4']);
});

test('flag: more than 25 % away either way, on prefill or decode; never without a previous figure', () => {
  const prev = { prompt_tokens_per_s: 400, gen_tokens_per_s: 100 };
  assert.deepEqual(flaggedFigures(undefined, { prompt_tokens_per_s: 1, gen_tokens_per_s: 1 }), []);
  assert.deepEqual(flaggedFigures(prev, { prompt_tokens_per_s: 500, gen_tokens_per_s: 75 }), [], 'exactly 25 % is not more than 25 %');
  assert.deepEqual(flaggedFigures(prev, { prompt_tokens_per_s: 501, gen_tokens_per_s: 100 }), ['prefill']);
  assert.deepEqual(flaggedFigures(prev, { prompt_tokens_per_s: 400, gen_tokens_per_s: 74 }), ['decode']);
  // The case: the peer measured 151 / 53 where it had 380 / 100.
  assert.deepEqual(flaggedFigures({ prompt_tokens_per_s: 380, gen_tokens_per_s: 100 }, { prompt_tokens_per_s: 151, gen_tokens_per_s: 53 }), ['prefill', 'decode']);
});

test('re-measure: while the latest figure is flagged, at most twice', () => {
  const prev = { prompt_tokens_per_s: 400, gen_tokens_per_s: 100 };
  const slow = { prompt_tokens_per_s: 150, gen_tokens_per_s: 50 };
  const fine = { prompt_tokens_per_s: 390, gen_tokens_per_s: 98 };
  assert.equal(shouldRemeasure(undefined, [slow]), false, 'no history: nothing to compare');
  assert.equal(shouldRemeasure(prev, [fine]), false);
  assert.equal(shouldRemeasure(prev, [slow]), true);
  assert.equal(shouldRemeasure(prev, [slow, slow]), true);
  assert.equal(shouldRemeasure(prev, [slow, slow, slow]), false, 'two re-measurements made');
  assert.equal(shouldRemeasure(prev, [slow, fine]), false, 'the re-measurement agrees with the history');
  assert.throws(() => shouldRemeasure(prev, []), /no measurement/);
});

test('history file: missing is empty, written one reads back, a wrong one is refused naming file and field', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fulcrum-peer-history-'));
  try {
    const file = path.join(dir, 'peer-history.json');
    assert.deepEqual(readHistory(file), { format: HISTORY_FORMAT, hosts: {} });
    const h = recordEntry(emptyHistory(), host, row, entry(380, 100));
    writeFileSync(file, JSON.stringify(h));
    assert.deepEqual(previousEntry(readHistory(file), host, row), entry(380, 100));
    writeFileSync(file, '{"format":');
    assert.throws(() => readHistory(file), (e: Error) => e.message.startsWith(`${file}: not valid JSON`));
    writeFileSync(file, JSON.stringify({ format: 'other/9', hosts: {} }));
    assert.throws(() => readHistory(file), /format: expected "fulcrum-bench-cpu-peer-history\/1", found "other\/9"/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const bad = recordEntry(emptyHistory(), host, row, entry(380, 100));
  (bad.hosts[hostKey(host)]!.rows[rowKey(row)]![0] as unknown as Record<string, unknown>).gen_tokens_per_s = -1;
  assert.throws(() => validateHistory(bad, 'h.json'), /h\.json: hosts\["AMD EPYC 9R14 \| flags [0-9a-f]+ \| isa native"\]\.rows\["0\.5B Q4_0 1T prompt 256 gen 48"\]\[0\]\.gen_tokens_per_s: must be a positive number, found -1/);
  assert.throws(() => validateHistory([], 'h.json'), /h\.json: top level: not a JSON object/);
});
