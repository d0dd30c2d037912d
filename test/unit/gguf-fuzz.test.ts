// Hostile GGUF headers: hundreds of deterministic mutations of a small valid file must each
// either parse or fail with a GgufFormatError that names the file and a byte offset, without
// hanging or allocating beyond the file's size. Then one targeted test per error kind, checking
// the offset and field the error names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { GgmlType } from '../../engine/model/ggml-types';
import { GgufFormatError, GgufValueType as T, readGguf, writeGguf, type GgufWriteSpec } from '../../engine/model/gguf/index';
import type { GgufLayout } from '../../engine/model/gguf/writer';
import { seededRandom } from '../../engine/model/seeded-random';
import { tempDir } from '../helpers/shared';

const baseSpec: GgufWriteSpec = {
  version: 3,
  kv: [
    { key: 'general.architecture', type: T.STRING, value: 'llama' },
    { key: 'general.alignment', type: T.UINT32, value: 32 },
    { key: 'fuzz.u64', type: T.UINT64, value: 123456789n },
    { key: 'fuzz.flag', type: T.BOOL, value: true },
    { key: 'fuzz.tokens', type: T.ARRAY, value: { itemType: T.STRING, items: ['<unk>', 'a', 'bc', 'Ġd'] } },
    { key: 'fuzz.scores', type: T.ARRAY, value: { itemType: T.FLOAT32, items: [0, -1, -2, -3] } },
    {
      key: 'fuzz.nested', type: T.ARRAY,
      value: { itemType: T.ARRAY, items: [{ itemType: T.INT32, items: [1, 2] }, { itemType: T.STRING, items: ['x'] }] },
    },
  ],
  tensors: [
    { name: 'w.f32', dims: [8, 2], type: GgmlType.F32, data: new Uint8Array(64).fill(1) },
    { name: 'w.q8_0', dims: [64, 2], type: GgmlType.Q8_0, data: new Uint8Array(4 * 34).fill(2) },
    { name: 'w.f16', dims: [3], type: GgmlType.F16, data: new Uint8Array(6).fill(3) },
  ],
};

interface Mutation { label: string; bytes: Buffer }

function withU64(buf: Buffer, at: number, v: bigint): Buffer {
  const b = Buffer.from(buf);
  b.writeBigUInt64LE(v, at);
  return b;
}

function withU32(buf: Buffer, at: number, v: number): Buffer {
  const b = Buffer.from(buf);
  b.writeUInt32LE(v >>> 0, at);
  return b;
}

/** Every structural boundary of the file: where each field starts. */
function boundaries(layout: GgufLayout): number[] {
  const at = new Set<number>([0, 4, 8, layout.tensorCountOffset, layout.kvCountOffset, layout.headerBytes, layout.dataOffset]);
  for (const kv of layout.kvs) { at.add(kv.offset); at.add(kv.offset + 8); at.add(kv.typeOffset); at.add(kv.valueOffset); at.add(kv.end); }
  for (const t of layout.tensors) {
    for (const o of [t.offset, t.offset + 8, t.nDimsOffset, t.dimsOffset, t.typeOffset, t.offsetFieldOffset, t.end, t.dataOffset, t.dataOffset + 1]) at.add(o);
  }
  return [...at].sort((a, b) => a - b);
}

function mutations(valid: Buffer, layout: GgufLayout): Mutation[] {
  const out: Mutation[] = [];
  const add = (label: string, bytes: Buffer): void => { out.push({ label, bytes }); };
  // Truncations at every structural boundary, and one byte either side of it.
  for (const b of boundaries(layout)) {
    for (const cut of [b - 1, b, b + 1]) if (cut >= 0 && cut < valid.length) add(`truncate at ${cut}`, valid.subarray(0, cut));
  }
  // Bad magic and versions.
  add('bad magic', Buffer.concat([Buffer.from('GGUG'), valid.subarray(4)]));
  for (const v of [0, 1, 4, 0x02000000, 0x03000000, 0xffffffff]) add(`version ${v}`, withU32(valid, 4, v));
  // Huge counts and lengths in every u64 count/length field.
  const u64Fields: Array<[string, number]> = [['tensor count', layout.tensorCountOffset], ['kv count', layout.kvCountOffset]];
  for (const kv of layout.kvs) u64Fields.push([`key length of ${kv.key}`, kv.offset]);
  for (const kv of layout.kvs) {
    const t = valid.readUInt32LE(kv.typeOffset);
    if (t === T.STRING) u64Fields.push([`string length of ${kv.key}`, kv.valueOffset]);
    if (t === T.ARRAY) u64Fields.push([`array count of ${kv.key}`, kv.valueOffset + 4]);
  }
  for (const t of layout.tensors) {
    u64Fields.push([`name length of ${t.name}`, t.offset]);
    u64Fields.push([`dims[0] of ${t.name}`, t.dimsOffset]);
    u64Fields.push([`offset of ${t.name}`, t.offsetFieldOffset]);
  }
  for (const [label, at] of u64Fields) {
    for (const v of [2n ** 64n - 1n, 2n ** 63n, 2n ** 32n, BigInt(valid.length), BigInt(valid.length + 1), 0n]) {
      add(`${label} = ${v}`, withU64(valid, at, v));
    }
  }
  // Unknown value types and ggml types; n_dims beyond 4.
  for (const kv of layout.kvs) for (const v of [13, 0xffffffff]) add(`value type of ${kv.key} = ${v}`, withU32(valid, kv.typeOffset, v));
  for (const t of layout.tensors) {
    for (const v of [4, 5, 31, 36, 0xffffffff]) add(`ggml type of ${t.name} = ${v}`, withU32(valid, t.typeOffset, v));
    for (const v of [0, 5, 0xffffffff]) add(`n_dims of ${t.name} = ${v}`, withU32(valid, t.nDimsOffset, v));
  }
  // Offsets: misaligned, overlapping, out of range.
  for (const t of layout.tensors) {
    const rel = BigInt(t.dataOffset - layout.dataOffset);
    add(`misaligned ${t.name}`, withU64(valid, t.offsetFieldOffset, rel + 1n));
    add(`far ${t.name}`, withU64(valid, t.offsetFieldOffset, BigInt(valid.length) * 2n));
    for (const other of layout.tensors) {
      if (other !== t) add(`${t.name} overlaps ${other.name}`, withU64(valid, t.offsetFieldOffset, BigInt(other.dataOffset - layout.dataOffset)));
    }
  }
  // Overflowing dims: every dim of the 2-D tensors huge.
  for (const t of layout.tensors) {
    const nDims = valid.readUInt32LE(t.nDimsOffset);
    let b = Buffer.from(valid);
    for (let d = 0; d < nDims; d++) b = withU64(b, t.dimsOffset + 8 * d, 2n ** 32n);
    add(`dims of ${t.name} all 2^32`, b);
  }
  // Random byte flips in the header and anywhere.
  const rand = seededRandom(0xf00d); // every run tries the same mutations
  for (let i = 0; i < 150; i++) {
    const b = Buffer.from(valid);
    const flips = 1 + Math.floor(rand() * 4);
    const span = i % 3 === 2 ? b.length : layout.headerBytes;
    for (let f = 0; f < flips; f++) b[Math.floor(rand() * span)] = Math.floor(rand() * 256);
    add(`random flips #${i}`, b);
  }
  return out;
}

function buildValid(dir: string): { file: string; bytes: Buffer; layout: GgufLayout } {
  const file = path.join(dir, 'valid.gguf');
  const layout = writeGguf(file, baseSpec);
  return { file, bytes: readFileSync(file), layout };
}

test('fuzz: ≥ 200 mutated headers each parse or throw GgufFormatError naming the file and a byte', { timeout: 15_000 }, () => {
  const { dir, cleanup } = tempDir();
  try {
    const { bytes, layout } = buildValid(dir);
    readGguf(path.join(dir, 'valid.gguf')); // the base file itself is valid
    const cases = mutations(bytes, layout);
    assert.ok(cases.length >= 200, `only ${cases.length} mutations`);
    const heapBefore = process.memoryUsage().heapUsed;
    let parsed = 0;
    let rejected = 0;
    const file = path.join(dir, 'mutant.gguf');
    for (const m of cases) {
      writeFileSync(file, m.bytes);
      try {
        readGguf(file);
        parsed++;
      } catch (e) {
        if (!(e instanceof GgufFormatError)) {
          assert.fail(`${m.label}: threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)} instead of GgufFormatError`);
        }
        assert.ok(e.message.includes(file), `${m.label}: message lacks the file path: ${e.message}`);
        assert.match(e.message, /byte \d+/, `${m.label}: message lacks a byte offset`);
        assert.ok(e.offset >= 0 && e.offset <= m.bytes.length, `${m.label}: offset ${e.offset} outside the file`);
        rejected++;
      }
    }
    // Nothing proportional to a claimed (huge) count was allocated.
    assert.ok(process.memoryUsage().heapUsed - heapBefore < 64 * 1024 * 1024, 'heap grew by more than 64 MiB');
    assert.ok(rejected > cases.length / 2, `only ${rejected} of ${cases.length} rejected`);
    assert.equal(parsed + rejected, cases.length);
    console.log(`fuzz: ${cases.length} mutations, ${rejected} rejected with GgufFormatError, ${parsed} parsed`);
  } finally {
    cleanup();
  }
});

/** Writes `bytes` to a file and expects readGguf to fail at `offset` with `field` and `problem`. */
function expectError(dir: string, bytes: Buffer, offset: number, field: string | RegExp, problem: RegExp, opts = {}): void {
  const file = path.join(dir, `case-${Math.random().toString(36).slice(2)}.gguf`);
  writeFileSync(file, bytes);
  assert.throws(() => readGguf(file, opts), (e: unknown) => {
    assert.ok(e instanceof GgufFormatError, `not a GgufFormatError: ${String(e)}`);
    assert.equal(e.file, file);
    assert.equal(e.offset, offset, `offset in: ${e.message}`);
    if (typeof field === 'string') assert.equal(e.field, field); else assert.match(e.field, field);
    assert.match(e.problem, problem);
    assert.match(e.message, new RegExp(`byte ${offset}\\b`));
    return true;
  });
}

test('targeted header errors name the right offset and field', () => {
  const { dir, cleanup } = tempDir();
  try {
    const { bytes, layout } = buildValid(dir);
    const kv = (key: string) => layout.kvs.find((k) => k.key === key)!;
    const tensor = (name: string) => layout.tensors.find((t) => t.name === name)!;

    expectError(dir, Buffer.concat([Buffer.from('GGML'), bytes.subarray(4)]), 0, 'magic', /expected "GGUF"/);
    expectError(dir, withU32(bytes, 4, 1), 4, 'version', /version 1 is not supported/);
    expectError(dir, withU32(bytes, 4, 0x03000000), 4, 'version', /big-endian \(version 3/);
    expectError(dir, withU32(bytes, 4, 7), 4, 'version', /unsupported GGUF version 7/);
    expectError(dir, bytes.subarray(0, 6), 4, 'version', /truncated/);

    // Counts larger than the file: rejected at the count, before anything is allocated.
    expectError(dir, withU64(bytes, layout.tensorCountOffset, 2n ** 40n), layout.tensorCountOffset, 'tensor count', /only \d+ remain/);
    expectError(dir, withU64(bytes, layout.kvCountOffset, 2n ** 63n), layout.kvCountOffset, 'metadata count', /only \d+ remain/);
    const arch = kv('general.architecture');
    expectError(dir, withU64(bytes, arch.valueOffset, 2n ** 64n - 1n), arch.valueOffset, 'metadata "general.architecture"', /string length .* only \d+ remain/);
    const tokens = kv('fuzz.tokens');
    expectError(dir, withU64(bytes, tokens.valueOffset + 4, 10n ** 12n), tokens.valueOffset + 4, 'metadata "fuzz.tokens" array count', /array of STRING count 1000000000000/);

    // Truncation: a fixed-size field cut short; the file too short for its declared counts.
    const q8t = tensor('w.q8_0');
    expectError(dir, bytes.subarray(0, q8t.typeOffset + 2), q8t.typeOffset, 'tensor "w.q8_0" type', /needs 4 bytes but the file ends at byte \d+ \(truncated\)/);
    expectError(dir, bytes.subarray(0, 150), 8, 'tensor count', /3 tensors and 7 metadata entries cannot fit in the 126 bytes left/);
    expectError(dir, withU64(bytes, arch.valueOffset, BigInt(bytes.length)), arch.valueOffset, 'metadata "general.architecture"', new RegExp(`string length ${bytes.length} needs at least`));

    expectError(dir, withU32(bytes, kv('fuzz.u64').typeOffset, 13), kv('fuzz.u64').typeOffset, 'metadata "fuzz.u64" type', /unknown GGUF value type 13/);
    expectError(dir, withU32(bytes, tokens.valueOffset, 99), tokens.valueOffset, 'metadata "fuzz.tokens" array item type', /unknown GGUF value type 99/);
    const flag = kv('fuzz.flag');
    const badBool = Buffer.from(bytes); badBool[flag.valueOffset] = 2;
    expectError(dir, badBool, flag.valueOffset, 'metadata "fuzz.flag"', /bool must be 0 or 1, got 2/);

    // Duplicate key: 'fuzz.tokens' and 'fuzz.scores' have equal lengths (11); rename the second.
    const dup = Buffer.from(bytes);
    dup.write('fuzz.tokens', kv('fuzz.scores').offset + 8, 'latin1');
    expectError(dir, dup, kv('fuzz.scores').offset, 'metadata "fuzz.tokens"', new RegExp(`duplicate key \\(first at byte ${tokens.offset}\\)`));

    // Invalid UTF-8 in a key.
    const badUtf = Buffer.from(bytes); badUtf[flag.offset + 8] = 0xff;
    expectError(dir, badUtf, flag.offset, 'metadata #3 key', /not valid UTF-8/);

    // Alignment not a power of two.
    expectError(dir, withU32(bytes, kv('general.alignment').valueOffset, 24), kv('general.alignment').offset, 'metadata "general.alignment"', /power of two/);
    expectError(dir, withU32(bytes, kv('general.alignment').valueOffset, 0), kv('general.alignment').offset, 'metadata "general.alignment"', /power of two/);

    // Tensor infos.
    const f32 = tensor('w.f32');
    const q8 = tensor('w.q8_0');
    const f16 = tensor('w.f16');
    expectError(dir, withU32(bytes, q8.typeOffset, 4), q8.typeOffset, 'tensor "w.q8_0" type', /unknown ggml type id 4/);
    expectError(dir, withU32(bytes, f32.nDimsOffset, 5), f32.nDimsOffset, 'tensor "w.f32" n_dims', /n_dims is 5, at most 4/);
    expectError(dir, withU64(bytes, f32.dimsOffset, 0n), f32.dimsOffset, 'tensor "w.f32" dims[0]', /dimension is 0/);
    expectError(dir, withU64(withU64(bytes, q8.dimsOffset, 2n ** 32n), q8.dimsOffset + 8, 2n ** 32n), q8.dimsOffset + 8, 'tensor "w.q8_0" dims[1]', /overflows 2\^53/);
    expectError(dir, withU64(bytes, q8.dimsOffset, 48n), q8.dimsOffset, 'tensor "w.q8_0" dims[0]', /48 is not a multiple of Q8_0's block size 32/);
    expectError(dir, withU64(bytes, f32.dimsOffset + 8, 2n ** 30n), f32.dimsOffset, 'tensor "w.f32" dims', /more than the whole file/);
    expectError(dir, withU64(bytes, q8.offsetFieldOffset, 65n), q8.offsetFieldOffset, 'tensor "w.q8_0" offset', /65 is not a multiple of the alignment 32/);
    expectError(dir, withU64(bytes, q8.offsetFieldOffset, 2n ** 62n), q8.offsetFieldOffset, 'tensor "w.q8_0" offset', /beyond the end of the file/);
    const lastRel = f16.dataOffset - layout.dataOffset;
    expectError(dir, withU64(bytes, f16.offsetFieldOffset, BigInt(lastRel + 64)), f16.offsetFieldOffset, 'tensor "w.f16" offset', /extends past the end of the file/);
    expectError(dir, bytes.subarray(0, f16.dataOffset + 3), f16.offsetFieldOffset, 'tensor "w.f16" offset', /extends past the end/);
    // w.f16 placed on w.q8_0's data: overlap reported at the later tensor's offset field.
    expectError(dir, withU64(bytes, f16.offsetFieldOffset, BigInt(q8.dataOffset - layout.dataOffset)), f16.offsetFieldOffset, 'tensor "w.f16" offset', /overlaps tensor "w.q8_0"/);
    // Duplicate tensor name: 'w.f32' -> 'w.f16' (same length).
    const dupName = Buffer.from(bytes);
    dupName.write('w.f16', f32.offset + 8, 'latin1');
    expectError(dir, dupName, f16.offset, 'tensor "w.f16"', new RegExp(`duplicate tensor name \\(first at byte ${f32.offset}\\)`));

    // The header limit.
    expectError(dir, bytes, tokens.valueOffset + 4 + 8, /metadata "fuzz.tokens"\[0\]/, /maxHeaderBytes/, { maxHeaderBytes: tokens.valueOffset + 4 + 8 + 4 });
  } finally {
    cleanup();
  }
});

test('deeply nested arrays are rejected before they exhaust the stack', () => {
  const { dir, cleanup } = tempDir();
  try {
    // key "n", type ARRAY, then 100 levels of (item type ARRAY, count 1), then (UINT8, 0).
    const parts: Buffer[] = [Buffer.from('GGUF'), Buffer.alloc(4), Buffer.alloc(8), Buffer.alloc(8)];
    parts[1]!.writeUInt32LE(3);
    parts[3]!.writeBigUInt64LE(1n);
    const key = Buffer.alloc(8 + 1 + 4); key.writeBigUInt64LE(1n); key.write('n', 8); key.writeUInt32LE(T.ARRAY, 9);
    parts.push(key);
    for (let i = 0; i < 100; i++) { const lvl = Buffer.alloc(12); lvl.writeUInt32LE(T.ARRAY); lvl.writeBigUInt64LE(1n, 4); parts.push(lvl); }
    const leaf = Buffer.alloc(12); leaf.writeUInt32LE(T.UINT8); parts.push(leaf);
    const bytes = Buffer.concat(parts);
    // Level 9's item type field: header 24 + key 13 + 8 levels of 12 bytes.
    expectError(dir, bytes, 24 + 13 + 8 * 12, /metadata "n"(\[0\])+/, /nested more than 8 deep/);
  } finally {
    cleanup();
  }
});

test('a file with zero tensors and padding-free end is valid (vocab-only files)', () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'v.gguf');
    writeGguf(file, { version: 2, kv: [{ key: 'a', type: T.STRING, value: 'b' }], tensors: [] });
    const g = readGguf(file);
    assert.equal(g.version, 2);
    assert.equal(g.tensors.length, 0);
  } finally {
    cleanup();
  }
});

test('counts that fit a (sparse) large file still hit the per-array and header limits before allocation', () => {
  const { dir, cleanup } = tempDir();
  try {
    // Header: 0 tensors, 1 kv "a" = ARRAY of UINT8 with 2^24 + 1 items; the file is then
    // extended (sparsely) so the items would fit in it.
    const head = Buffer.alloc(24 + 8 + 1 + 4 + 4 + 8);
    head.write('GGUF'); head.writeUInt32LE(3, 4); head.writeBigUInt64LE(0n, 8); head.writeBigUInt64LE(1n, 16);
    head.writeBigUInt64LE(1n, 24); head.write('a', 32); head.writeUInt32LE(T.ARRAY, 33);
    head.writeUInt32LE(T.UINT8, 37); head.writeBigUInt64LE(2n ** 24n + 1n, 41);
    const file = path.join(dir, 'sparse.gguf');
    writeFileSync(file, head);
    truncateSync(file, head.length + 2 ** 24 + 16);
    assert.throws(() => readGguf(file), (e: unknown) =>
      e instanceof GgufFormatError && e.offset === 41 && e.field === 'metadata "a" array count' && /16777217 items exceed the limit of 16777216/.test(e.problem));
    // A string that fits in the file but not under maxHeaderBytes.
    const str = Buffer.from(head.subarray(0, 41));
    str.writeUInt32LE(T.STRING, 33);
    const strHead = Buffer.concat([str.subarray(0, 37), Buffer.alloc(8)]);
    strHead.writeBigUInt64LE(2n ** 24n, 37);
    writeFileSync(file, strHead);
    truncateSync(file, strHead.length + 2 ** 24);
    assert.throws(() => readGguf(file, { maxHeaderBytes: 1 << 20 }), (e: unknown) =>
      e instanceof GgufFormatError && e.offset === 45 && /maxHeaderBytes/.test(e.problem));
  } finally {
    cleanup();
  }
});
