// The writer and the reader agree on every value type, nested arrays, both versions, and
// alignments; and the reader reads the real shared files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { GgmlType } from '../../engine/model/ggml-types';
import {
  GgufValueType as T,
  findTensor,
  metaArray,
  metaBool,
  metaNumber,
  metaNumberArray,
  metaOptionalNumber,
  metaString,
  metaStringArray,
  GgufMetadataError,
  readGguf,
  writeGguf,
  type GgufValue,
  type GgufWriteKv,
  type GgufWriteTensor,
} from '../../engine/model/gguf/index';
import { encodeGgufHeader } from '../../engine/model/gguf/writer';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

const everyType: GgufWriteKv[] = [
  { key: 'test.u8', type: T.UINT8, value: 255 },
  { key: 'test.i8', type: T.INT8, value: -128 },
  { key: 'test.u16', type: T.UINT16, value: 65535 },
  { key: 'test.i16', type: T.INT16, value: -32768 },
  { key: 'test.u32', type: T.UINT32, value: 4294967295 },
  { key: 'test.i32', type: T.INT32, value: -2147483648 },
  { key: 'test.f32', type: T.FLOAT32, value: 1.5 },
  { key: 'test.f64', type: T.FLOAT64, value: Math.PI },
  { key: 'test.bool.true', type: T.BOOL, value: true },
  { key: 'test.bool.false', type: T.BOOL, value: false },
  { key: 'test.string', type: T.STRING, value: 'héllo ▁world \u{1F600}' },
  { key: 'test.string.bom', type: T.STRING, value: '\uFEFFkept' },
  { key: 'test.string.empty', type: T.STRING, value: '' },
  { key: 'test.u64', type: T.UINT64, value: 18446744073709551615n },
  { key: 'test.i64', type: T.INT64, value: -9223372036854775808n },
  { key: 'test.arr.u8', type: T.ARRAY, value: { itemType: T.UINT8, items: [0, 1, 255] } },
  { key: 'test.arr.i32', type: T.ARRAY, value: { itemType: T.INT32, items: [-1, 0, 7] } },
  { key: 'test.arr.f32', type: T.ARRAY, value: { itemType: T.FLOAT32, items: [0.25, -2, 1e10] } },
  { key: 'test.arr.u64', type: T.ARRAY, value: { itemType: T.UINT64, items: [0n, 2n ** 50n] } },
  { key: 'test.arr.bool', type: T.ARRAY, value: { itemType: T.BOOL, items: [true, false, true] } },
  { key: 'test.arr.str', type: T.ARRAY, value: { itemType: T.STRING, items: ['a', '', 'Ġ t', '<0x0A>'] } },
  { key: 'test.arr.empty', type: T.ARRAY, value: { itemType: T.FLOAT64, items: [] } },
  {
    key: 'test.arr.nested',
    type: T.ARRAY,
    value: {
      itemType: T.ARRAY,
      items: [
        { itemType: T.INT16, items: [1, -2] },
        { itemType: T.ARRAY, items: [{ itemType: T.STRING, items: ['deep'] }] },
        { itemType: T.UINT8, items: [] },
      ],
    },
  },
];

function tensor(name: string, dims: number[], type: GgmlType, bytes: number, fill: number): GgufWriteTensor {
  return { name, dims, type, data: new Uint8Array(bytes).fill(fill) };
}

const tensors: GgufWriteTensor[] = [
  tensor('a.f32', [3, 2], GgmlType.F32, 24, 1),
  tensor('b.q8', [64, 2], GgmlType.Q8_0, 4 * 34, 2),
  tensor('c.f16', [5], GgmlType.F16, 10, 3),
  tensor('d.q4k', [256, 1, 1, 2], GgmlType.Q4_K, 2 * 144, 4),
];

for (const version of [2, 3] as const) {
  for (const alignment of [1, 32, 64, 4096]) {
    test(`round trip: every value type and tensor layout, GGUF v${version}, alignment ${alignment}`, () => {
      const { dir, cleanup } = tempDir();
      try {
        const file = path.join(dir, 'rt.gguf');
        const layout = writeGguf(file, { version, alignment, kv: everyType, tensors });
        const g = readGguf(file);
        assert.equal(g.version, version);
        assert.equal(g.alignment, alignment);
        assert.equal(g.fileSize, statSync(file).size);
        assert.equal(g.dataOffset, layout.dataOffset);
        assert.equal(g.dataOffset % alignment, 0);
        for (const kv of everyType) {
          const got = g.kv.get(kv.key);
          assert.ok(got, `key ${kv.key} read back`);
          assert.equal(got.type, kv.type);
          const expected: GgufValue = kv.type === T.ARRAY && kv.key === 'test.arr.f32'
            ? { itemType: T.FLOAT32, items: [0.25, -2, Math.fround(1e10)] } : kv.value;
          assert.deepEqual(got.value, expected, kv.key);
        }
        if (alignment !== 32) assert.equal(metaNumber(g, 'general.alignment'), alignment);
        const bytes = readFileSync(file);
        assert.equal(g.tensors.length, tensors.length);
        tensors.forEach((t, i) => {
          const info = g.tensors[i]!;
          assert.equal(info.name, t.name);
          assert.deepEqual(info.dims, t.dims);
          assert.equal(info.type, t.type);
          assert.equal(info.absOffset % alignment, 0);
          assert.equal(info.absOffset, layout.tensors[i]!.dataOffset);
          const data = t.data as Uint8Array;
          assert.equal(info.byteSize, data.length);
          assert.deepEqual(bytes.subarray(info.absOffset, info.absOffset + info.byteSize), Buffer.from(data));
        });
        assert.equal(findTensor(g, 'b.q8')?.nElements, 128);
        assert.equal(findTensor(g, 'd.q4k')?.nElements, 512);
      } finally {
        cleanup();
      }
    });
  }
}

test('round trip: lazy tensor data is produced only when written', () => {
  const { dir, cleanup } = tempDir();
  try {
    const order: string[] = [];
    const lazy = (name: string, n: number): GgufWriteTensor => ({
      name, dims: [n], type: GgmlType.F32, data: () => { order.push(name); return new Uint8Array(n * 4); },
    });
    const file = path.join(dir, 'lazy.gguf');
    writeGguf(file, { kv: [], tensors: [lazy('x', 3), lazy('y', 8)] });
    assert.deepEqual(order, ['x', 'y']);
    const g = readGguf(file);
    assert.deepEqual(g.tensors.map((t) => [t.name, t.relOffset]), [['x', 0], ['y', 32]]);
    // The last tensor is padded too, as llama.cpp expects.
    assert.equal(g.fileSize, g.dataOffset + 64);
  } finally {
    cleanup();
  }
});

test('writer rejects bad input with an error naming the field', () => {
  const bad = (spec: Parameters<typeof encodeGgufHeader>[0], pattern: RegExp) =>
    assert.throws(() => encodeGgufHeader(spec), pattern);
  bad({ kv: [{ key: 'k', type: T.UINT8, value: 256 }], tensors: [] }, /metadata "k".*256/);
  bad({ kv: [{ key: 'k', type: T.STRING, value: 3 }], tensors: [] }, /metadata "k".*string/);
  bad({ kv: [{ key: 'k', type: T.BOOL, value: 1 }, { key: 'k', type: T.BOOL, value: 1 }], tensors: [] }, /metadata "k"/);
  bad({ kv: [], tensors: [{ name: 'q', dims: [33], type: GgmlType.Q8_0, data: new Uint8Array(0) }] }, /tensor "q".*block size 32/);
  bad({ alignment: 24, kv: [], tensors: [] }, /alignment.*power of two/);
  const { dir, cleanup } = tempDir();
  try {
    assert.throws(() => writeGguf(path.join(dir, 'x.gguf'), {
      kv: [], tensors: [{ name: 'short', dims: [4], type: GgmlType.F32, data: new Uint8Array(15) }],
    }), /tensor "short".*15 bytes.*needs 16/);
  } finally {
    cleanup();
  }
});

test('typed metadata accessors name the file and key on a missing key or wrong type', () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'meta.gguf');
    writeGguf(file, { kv: everyType, tensors: [] });
    const g = readGguf(file);
    assert.equal(metaString(g, 'test.string'), 'héllo ▁world \u{1F600}');
    assert.equal(metaNumber(g, 'test.u32'), 4294967295);
    assert.equal(metaNumber(g, 'test.f64'), Math.PI);
    assert.equal(metaBool(g, 'test.bool.true'), true);
    assert.deepEqual(metaStringArray(g, 'test.arr.str'), ['a', '', 'Ġ t', '<0x0A>']);
    assert.deepEqual(metaNumberArray(g, 'test.arr.u64'), [0, 2 ** 50]);
    assert.equal(metaArray(g, 'test.arr.nested').items.length, 3);
    assert.equal(metaOptionalNumber(g, 'absent.key'), undefined);
    assert.throws(() => metaString(g, 'absent.key'), (e: unknown) =>
      e instanceof GgufMetadataError && e.message.includes(file) && e.message.includes("'absent.key'") && /missing/.test(e.message));
    assert.throws(() => metaNumber(g, 'test.string'), (e: unknown) =>
      e instanceof GgufMetadataError && e.message.includes(file) && /expected a number, found STRING/.test(e.message));
    assert.throws(() => metaStringArray(g, 'test.arr.i32'), /expected an array of STRING, found array of INT32/);
    // 2^64-1 cannot be a JS number exactly.
    assert.throws(() => metaNumber(g, 'test.u64'), /test\.u64.*2\^53/);
  } finally {
    cleanup();
  }
});

const stories = sharedPath('models', 'stories260K.gguf');
test('reads the real stories260K.gguf header', { skip: skipUnlessShared(stories) }, () => {
  const g = readGguf(stories);
  assert.equal(g.version, 3);
  assert.equal(g.fileSize, 1185376);
  assert.equal(g.tensors.length, 48);
  assert.equal(metaString(g, 'general.architecture'), 'llama');
  assert.equal(metaNumber(g, 'llama.block_count'), 5);
  assert.equal(metaStringArray(g, 'tokenizer.ggml.tokens').length, 512);
  assert.ok(g.tensors.every((t) => t.type === GgmlType.F32));
  const sorted = [...g.tensors].sort((a, b) => a.relOffset - b.relOffset);
  const last = sorted[sorted.length - 1]!;
  assert.ok(last.absOffset + last.byteSize <= g.fileSize);
  assert.deepEqual(findTensor(g, 'blk.0.attn_k.weight')?.dims, [64, 32]);
  assert.equal(g.tensors.reduce((s, t) => s + t.nElements, 0), 292_800); // 2 x 64x512 + 64 + 5 x (4096+2048+2048+4096+64+3x64x172+64)
});

for (const name of ['llama-spm', 'gpt-2', 'deepseek-coder', 'starcoder']) {
  const file = sharedPath('vocab', `ggml-vocab-${name}.gguf`);
  test(`reads the real vocab file ggml-vocab-${name}.gguf`, { skip: skipUnlessShared(file) }, () => {
    const g = readGguf(file);
    assert.equal(g.tensors.length, 0);
    const tokens = metaStringArray(g, 'tokenizer.ggml.tokens');
    assert.ok(tokens.length > 30000);
    assert.equal(metaNumberArray(g, 'tokenizer.ggml.token_type').length, tokens.length);
  });
}

test('round trip: headers larger than the writer buffer and the reader window (1 MiB)', () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'big-header.gguf');
    const items = Array.from({ length: 120_000 }, (_, i) => `piece-${i.toString(36)}-▁x`);
    const long = 'ab'.repeat(1_500_000); // one 3 MB string: larger than the read window
    writeGguf(file, {
      kv: [
        { key: 'big.tokens', type: T.ARRAY, value: { itemType: T.STRING, items } },
        { key: 'big.long', type: T.STRING, value: long },
        { key: 'big.after', type: T.UINT32, value: 42 },
      ],
      tensors: [{ name: 't', dims: [4], type: GgmlType.F32, data: new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]) }],
    });
    const g = readGguf(file);
    assert.deepEqual(metaStringArray(g, 'big.tokens'), items);
    assert.equal(metaString(g, 'big.long'), long);
    assert.equal(metaNumber(g, 'big.after'), 42);
    assert.deepEqual(readFileSync(file).subarray(g.tensors[0]!.absOffset, g.tensors[0]!.absOffset + 16), Buffer.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]));
    assert.throws(() => readGguf(file, { maxHeaderBytes: 1 << 20 }), /maxHeaderBytes/);
  } finally {
    cleanup();
  }
});
