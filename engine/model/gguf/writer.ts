// Writes GGUF v2/v3 little-endian files: test fixtures and synthetic models. The header is
// encoded in memory (it is small); tensor data is written tensor by tensor, and a tensor's data
// may be produced lazily, so a multi-GiB model never sits in one buffer.

import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { ggmlTensorBytes, ggmlTypeInfo, ggmlTypeName, type GgmlType } from '../ggml-types';
import { GgufValueType, type GgufArray, type GgufValue } from './types';

export interface GgufWriteKv {
  key: string;
  type: GgufValueType;
  value: GgufValue;
}

export interface GgufWriteTensor {
  name: string;
  /** Innermost (contiguous) dimension first, as GGUF stores them. */
  dims: number[];
  type: GgmlType;
  /**
   * The tensor's bytes, or a function called when the writer reaches this tensor that returns
   * them whole or as consecutive chunks (so a large tensor need never be in memory at once).
   */
  data: Uint8Array | (() => Uint8Array | Iterable<Uint8Array>);
}

export interface GgufWriteSpec {
  version?: 2 | 3;
  /** Data alignment; written as general.alignment when it is not the default 32. */
  alignment?: number;
  kv: GgufWriteKv[];
  tensors: GgufWriteTensor[];
}

/** Where each structure landed in the file (tests use it to aim mutations at fields). */
export interface GgufLayout {
  headerBytes: number;
  dataOffset: number;
  kvCountOffset: number;
  tensorCountOffset: number;
  /** Byte offset of each metadata entry's key length field, and of its type and value. */
  kvs: Array<{ key: string; offset: number; typeOffset: number; valueOffset: number; end: number }>;
  /** Byte offsets of each tensor info's fields, and of its data. */
  tensors: Array<{
    name: string;
    offset: number;
    nDimsOffset: number;
    dimsOffset: number;
    typeOffset: number;
    offsetFieldOffset: number;
    end: number;
    dataOffset: number;
    byteSize: number;
  }>;
}

const DEFAULT_ALIGNMENT = 32;

/** A growable little-endian byte sink. */
class ByteSink {
  private buf = Buffer.alloc(4096);
  length = 0;

  /** Grows the buffer for `n` more bytes and returns where they start. Call it before touching
   * `this.buf`: growing replaces the buffer. */
  private reserve(n: number): number {
    if (this.length + n > this.buf.length) {
      const bigger = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
      this.buf.copy(bigger, 0, 0, this.length);
      this.buf = bigger;
    }
    const at = this.length;
    this.length += n;
    return at;
  }

  u8(v: number): void { const at = this.reserve(1); this.buf.writeUInt8(v, at); }
  i8(v: number): void { const at = this.reserve(1); this.buf.writeInt8(v, at); }
  u16(v: number): void { const at = this.reserve(2); this.buf.writeUInt16LE(v, at); }
  i16(v: number): void { const at = this.reserve(2); this.buf.writeInt16LE(v, at); }
  u32(v: number): void { const at = this.reserve(4); this.buf.writeUInt32LE(v, at); }
  i32(v: number): void { const at = this.reserve(4); this.buf.writeInt32LE(v, at); }
  f32(v: number): void { const at = this.reserve(4); this.buf.writeFloatLE(v, at); }
  f64(v: number): void { const at = this.reserve(8); this.buf.writeDoubleLE(v, at); }
  u64(v: bigint | number): void { const at = this.reserve(8); this.buf.writeBigUInt64LE(BigInt(v), at); }
  i64(v: bigint | number): void { const at = this.reserve(8); this.buf.writeBigInt64LE(BigInt(v), at); }
  bytes(b: Uint8Array): void { const at = this.reserve(b.length); this.buf.set(b, at); }
  string(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.bytes(b);
  }
  pad(alignment: number): void {
    const target = Math.ceil(this.length / alignment) * alignment;
    this.reserve(target - this.length);
  }
  result(): Buffer { return this.buf.subarray(0, this.length); }
}

function fail(where: string, problem: string): never {
  throw new Error(`writeGguf: ${where}: ${problem}`);
}

function expectNumber(v: GgufValue, where: string, min: number, max: number, integer: boolean): number {
  if (typeof v !== 'number') fail(where, `expected a number, got ${typeof v}`);
  if (integer && (!Number.isInteger(v) || v < min || v > max)) fail(where, `${v} is not an integer in [${min}, ${max}]`);
  return v;
}

function expectBigint(v: GgufValue, where: string, min: bigint, max: bigint): bigint {
  const b = typeof v === 'bigint' ? v : typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : undefined;
  if (b === undefined || b < min || b > max) fail(where, `expected a 64-bit integer in [${min}, ${max}], got ${String(v)}`);
  return b;
}

function writeValue(out: ByteSink, type: GgufValueType, v: GgufValue, where: string): void {
  switch (type) {
    case GgufValueType.UINT8: out.u8(expectNumber(v, where, 0, 0xff, true)); return;
    case GgufValueType.INT8: out.i8(expectNumber(v, where, -0x80, 0x7f, true)); return;
    case GgufValueType.UINT16: out.u16(expectNumber(v, where, 0, 0xffff, true)); return;
    case GgufValueType.INT16: out.i16(expectNumber(v, where, -0x8000, 0x7fff, true)); return;
    case GgufValueType.UINT32: out.u32(expectNumber(v, where, 0, 0xffffffff, true)); return;
    case GgufValueType.INT32: out.i32(expectNumber(v, where, -0x80000000, 0x7fffffff, true)); return;
    case GgufValueType.FLOAT32: out.f32(expectNumber(v, where, -Infinity, Infinity, false)); return;
    case GgufValueType.FLOAT64: out.f64(expectNumber(v, where, -Infinity, Infinity, false)); return;
    case GgufValueType.UINT64: out.u64(expectBigint(v, where, 0n, 2n ** 64n - 1n)); return;
    case GgufValueType.INT64: out.i64(expectBigint(v, where, -(2n ** 63n), 2n ** 63n - 1n)); return;
    case GgufValueType.BOOL:
      if (typeof v !== 'boolean') fail(where, `expected a boolean, got ${typeof v}`);
      out.u8(v ? 1 : 0);
      return;
    case GgufValueType.STRING:
      if (typeof v !== 'string') fail(where, `expected a string, got ${typeof v}`);
      out.string(v);
      return;
    case GgufValueType.ARRAY: {
      if (typeof v !== 'object' || v === null || !Array.isArray((v as GgufArray).items)) fail(where, 'expected a GgufArray');
      const arr = v as GgufArray;
      out.u32(arr.itemType);
      out.u64(arr.items.length);
      arr.items.forEach((item, i) => writeValue(out, arr.itemType, item, `${where}[${i}]`));
      return;
    }
    default:
      fail(where, `unknown GGUF value type ${String(type)}`);
  }
}

function checkAlignment(alignment: number): void {
  if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
    fail('alignment', `must be a nonzero power of two, got ${alignment}`);
  }
}

/** The metadata list actually written: general.alignment added when a non-default alignment is asked for. */
function effectiveKvs(spec: GgufWriteSpec, alignment: number): GgufWriteKv[] {
  const given = spec.kv.find((k) => k.key === 'general.alignment');
  if (given) {
    if (given.value !== alignment && spec.alignment !== undefined) {
      fail('general.alignment', `metadata says ${String(given.value)} but spec.alignment is ${alignment}`);
    }
    return spec.kv;
  }
  if (alignment === DEFAULT_ALIGNMENT) return spec.kv;
  return [...spec.kv, { key: 'general.alignment', type: GgufValueType.UINT32, value: alignment }];
}

function specAlignment(spec: GgufWriteSpec): number {
  const given = spec.kv.find((k) => k.key === 'general.alignment');
  const alignment = spec.alignment ?? (typeof given?.value === 'number' ? given.value : DEFAULT_ALIGNMENT);
  checkAlignment(alignment);
  return alignment;
}

function tensorBytes(t: GgufWriteTensor): number {
  const info = ggmlTypeInfo(t.type);
  if (!info) fail(`tensor "${t.name}"`, `unknown ggml type ${t.type}`);
  if (t.dims.length > 4 || t.dims.some((d) => !Number.isSafeInteger(d) || d <= 0)) {
    fail(`tensor "${t.name}"`, `dims must be 1 to 4 positive integers, got [${t.dims.join(', ')}]`);
  }
  const n = t.dims.reduce((a, b) => a * b, 1);
  const bytes = ggmlTensorBytes(t.type, n);
  if (bytes === undefined || (t.dims[0] ?? 1) % info.blockSize !== 0) {
    fail(`tensor "${t.name}"`, `first dimension ${t.dims[0]} is not a multiple of ${info.name}'s block size ${info.blockSize}`);
  }
  return bytes;
}

/** Encodes the header (everything up to the aligned start of the data) and where each field lies. */
export function encodeGgufHeader(spec: GgufWriteSpec): { header: Buffer; layout: GgufLayout } {
  const version = spec.version ?? 3;
  const alignment = specAlignment(spec);
  const kvs = effectiveKvs(spec, alignment);
  const seenKeys = new Set<string>();
  const seenNames = new Set<string>();
  const out = new ByteSink();
  out.bytes(Buffer.from('GGUF', 'latin1'));
  out.u32(version);
  const tensorCountOffset = out.length;
  out.u64(spec.tensors.length);
  const kvCountOffset = out.length;
  out.u64(kvs.length);
  const layout: GgufLayout = { headerBytes: 0, dataOffset: 0, kvCountOffset, tensorCountOffset, kvs: [], tensors: [] };
  for (const kv of kvs) {
    if (seenKeys.has(kv.key)) fail(`metadata "${kv.key}"`, 'duplicate key');
    seenKeys.add(kv.key);
    const offset = out.length;
    out.string(kv.key);
    const typeOffset = out.length;
    out.u32(kv.type);
    const valueOffset = out.length;
    writeValue(out, kv.type, kv.value, `metadata "${kv.key}"`);
    layout.kvs.push({ key: kv.key, offset, typeOffset, valueOffset, end: out.length });
  }
  let relOffset = 0;
  for (const t of spec.tensors) {
    if (seenNames.has(t.name)) fail(`tensor "${t.name}"`, 'duplicate tensor name');
    seenNames.add(t.name);
    const byteSize = tensorBytes(t);
    const offset = out.length;
    out.string(t.name);
    const nDimsOffset = out.length;
    out.u32(t.dims.length);
    const dimsOffset = out.length;
    for (const d of t.dims) out.u64(d);
    const typeOffset = out.length;
    out.u32(t.type);
    const offsetFieldOffset = out.length;
    out.u64(relOffset);
    layout.tensors.push({ name: t.name, offset, nDimsOffset, dimsOffset, typeOffset, offsetFieldOffset, end: out.length, dataOffset: relOffset, byteSize });
    relOffset += Math.ceil(byteSize / alignment) * alignment;
  }
  layout.headerBytes = out.length;
  out.pad(alignment);
  layout.dataOffset = out.length;
  for (const t of layout.tensors) t.dataOffset += layout.dataOffset;
  return { header: out.result(), layout };
}

function writeAll(fd: number, bytes: Uint8Array): void {
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
}

/**
 * Writes a GGUF file. Tensor data is written one tensor at a time in the given order, each
 * padded to the alignment; lazy `data` functions are called only when their tensor is reached.
 */
export function writeGguf(path: string, spec: GgufWriteSpec): GgufLayout {
  const { header, layout } = encodeGgufHeader(spec);
  const alignment = specAlignment(spec);
  const padding = new Uint8Array(alignment);
  const fd = openSync(path, 'w');
  let complete = false;
  try {
    writeAll(fd, header);
    spec.tensors.forEach((t, i) => {
      const produced = typeof t.data === 'function' ? t.data() : t.data;
      const chunks: Iterable<Uint8Array> = produced instanceof Uint8Array ? [produced] : produced;
      const expected = layout.tensors[i]!.byteSize;
      let total = 0;
      for (const chunk of chunks) {
        total += chunk.length;
        if (total > expected) fail(`tensor "${t.name}"`, `data has more than the ${expected} bytes [${t.dims.join(', ')}] ${ggmlTypeName(t.type)} needs`);
        writeAll(fd, chunk);
      }
      if (total !== expected) {
        fail(`tensor "${t.name}"`, `data has ${total} bytes; [${t.dims.join(', ')}] ${ggmlTypeName(t.type)} needs ${expected}`);
      }
      const pad = (alignment - (expected % alignment)) % alignment;
      // The last tensor is padded too: llama.cpp sizes the data section as the sum of padded sizes.
      if (pad > 0) writeAll(fd, padding.subarray(0, pad));
    });
    complete = true;
  } finally {
    closeSync(fd);
    // A half-written file would look like a truncated model later; remove it.
    if (!complete) rmSync(path, { force: true });
  }
  return layout;
}
