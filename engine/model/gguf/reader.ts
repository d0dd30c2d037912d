// Reads a GGUF file's header (metadata and tensor infos) with bounded, chunked reads.
// Tensor data is never read here: the native addon memory-maps it. Every check that a hostile
// file could defeat (lengths, counts, dimensions, offsets) happens before anything is allocated
// for it, and every failure is a GgufFormatError naming the file, byte offset and field.

import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { ggmlTypeInfo, ggmlTypeName } from '../ggml-types';
import {
  GgufFormatError,
  GgufValueType,
  type GgufArray,
  type GgufFile,
  type GgufKv,
  type GgufTensorInfo,
  type GgufValue,
} from './types';

/** "GGUF" as the first four bytes. */
const GGUF_MAGIC = Buffer.from('GGUF', 'latin1');
const DEFAULT_ALIGNMENT = 32;
/** Headers of real models (tokenizer arrays included) are a few MiB; this bounds a hostile one. */
export const DEFAULT_MAX_HEADER_BYTES = 64 * 1024 * 1024;
/**
 * Items in one metadata array. The largest real ones (tokenizer tokens, merges) hold a few
 * hundred thousand; a JS array of numbers costs ~8 bytes per item, so this bounds memory.
 */
export const MAX_ARRAY_ITEMS = 1 << 24;
/** ggml's GGML_MAX_DIMS. */
const MAX_DIMS = 4;
/** Real files nest arrays at most once or twice; deep nesting would only exhaust the stack. */
const MAX_ARRAY_DEPTH = 8;
const CHUNK_BYTES = 1 << 20;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** Smallest number of bytes one value of each type occupies (for counts checked before allocation). */
const MIN_VALUE_BYTES: Record<GgufValueType, number> = {
  [GgufValueType.UINT8]: 1,
  [GgufValueType.INT8]: 1,
  [GgufValueType.UINT16]: 2,
  [GgufValueType.INT16]: 2,
  [GgufValueType.UINT32]: 4,
  [GgufValueType.INT32]: 4,
  [GgufValueType.FLOAT32]: 4,
  [GgufValueType.BOOL]: 1,
  [GgufValueType.STRING]: 8, // length field of an empty string
  [GgufValueType.ARRAY]: 12, // item type + count of an empty array
  [GgufValueType.UINT64]: 8,
  [GgufValueType.INT64]: 8,
  [GgufValueType.FLOAT64]: 8,
};
/** A metadata entry is at least: key length (8) + one key byte + value type (4) + one value byte. */
const MIN_KV_BYTES = 14;
/** A tensor info is at least: name length (8) + one name byte + n_dims (4) + type (4) + offset (8). */
const MIN_TENSOR_INFO_BYTES = 25;

export interface ReadGgufOptions {
  /** The header (everything before the tensor data) may not be longer than this. */
  maxHeaderBytes?: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A forward-only reader over the file with a growable window of buffered bytes. */
class HeaderCursor {
  private buf: Buffer;
  /** File offset of buf[0]. */
  private bufStart = 0;
  private bufLen = 0;
  pos = 0;

  constructor(
    private readonly fd: number,
    readonly path: string,
    readonly fileSize: number,
    readonly limit: number,
  ) {
    this.buf = Buffer.allocUnsafe(Math.max(64, Math.min(CHUNK_BYTES, fileSize)));
  }

  error(offset: number, field: string, problem: string): GgufFormatError {
    return new GgufFormatError(this.path, offset, field, problem);
  }

  /** Bytes between the cursor and the end of the file. */
  remaining(): number {
    return this.fileSize - this.pos;
  }

  /** Makes `n` bytes from the cursor available in the window, or throws naming `field`. */
  private ensure(n: number, field: string): number {
    const end = this.pos + n;
    if (end > this.fileSize) {
      throw this.error(this.pos, field, `needs ${n} bytes but the file ends at byte ${this.fileSize} (truncated)`);
    }
    if (end > this.limit) {
      throw this.error(this.pos, field, `header would exceed the ${this.limit}-byte limit (maxHeaderBytes)`);
    }
    if (this.pos >= this.bufStart && end <= this.bufStart + this.bufLen) return this.pos - this.bufStart;
    // Refill: keep the unread bytes still in the window, then read at least up to `end`.
    const keepFrom = Math.max(this.pos, this.bufStart);
    const keep = Math.max(0, this.bufStart + this.bufLen - keepFrom);
    if (n > this.buf.length) {
      const bigger = Buffer.allocUnsafe(Math.max(n, this.buf.length * 2));
      this.buf.copy(bigger, 0, keepFrom - this.bufStart, keepFrom - this.bufStart + keep);
      this.buf = bigger;
    } else if (keep > 0) {
      this.buf.copy(this.buf, 0, keepFrom - this.bufStart, keepFrom - this.bufStart + keep);
    }
    this.bufStart = this.pos;
    this.bufLen = keep;
    while (this.bufLen < n) {
      const want = Math.min(this.buf.length - this.bufLen, this.fileSize - (this.bufStart + this.bufLen));
      const got = readSync(this.fd, this.buf, this.bufLen, want, this.bufStart + this.bufLen);
      if (got <= 0) {
        throw this.error(this.bufStart + this.bufLen, field, 'file ended while reading (it shrank after being opened?)');
      }
      this.bufLen += got;
    }
    return 0;
  }

  bytes(n: number, field: string): Buffer {
    const at = this.ensure(n, field);
    this.pos += n;
    return this.buf.subarray(at, at + n);
  }

  u8(field: string): number { const at = this.ensure(1, field); this.pos += 1; return this.buf.readUInt8(at); }
  i8(field: string): number { const at = this.ensure(1, field); this.pos += 1; return this.buf.readInt8(at); }
  u16(field: string): number { const at = this.ensure(2, field); this.pos += 2; return this.buf.readUInt16LE(at); }
  i16(field: string): number { const at = this.ensure(2, field); this.pos += 2; return this.buf.readInt16LE(at); }
  u32(field: string): number { const at = this.ensure(4, field); this.pos += 4; return this.buf.readUInt32LE(at); }
  i32(field: string): number { const at = this.ensure(4, field); this.pos += 4; return this.buf.readInt32LE(at); }
  f32(field: string): number { const at = this.ensure(4, field); this.pos += 4; return this.buf.readFloatLE(at); }
  f64(field: string): number { const at = this.ensure(8, field); this.pos += 8; return this.buf.readDoubleLE(at); }
  u64(field: string): bigint { const at = this.ensure(8, field); this.pos += 8; return this.buf.readBigUInt64LE(at); }
  i64(field: string): bigint { const at = this.ensure(8, field); this.pos += 8; return this.buf.readBigInt64LE(at); }

  /**
   * A count or length that promises at least `minBytesEach` bytes per unit after it; checked
   * against the bytes left in the file before the caller allocates anything for it.
   */
  count(field: string, minBytesEach: number, what: string): number {
    const at = this.pos;
    const n = this.u64(field);
    const left = BigInt(this.remaining());
    if (n * BigInt(minBytesEach) > left) {
      throw this.error(at, field, `${what} ${n} needs at least ${n * BigInt(minBytesEach)} bytes but only ${left} remain in the file`);
    }
    return Number(n);
  }

  string(field: string): string {
    const at = this.pos;
    const len = this.count(field, 1, 'string length');
    const raw = this.bytes(len, field);
    // Buffer's decoder is several times faster than TextDecoder but replaces invalid bytes with
    // U+FFFD silently; only when that character appears is the strict decoder asked.
    const text = raw.toString('utf8');
    if (!text.includes('\uFFFD')) return text;
    try {
      return utf8.decode(raw);
    } catch {
      throw this.error(at, field, `string of ${len} bytes is not valid UTF-8`);
    }
  }
}

function isValueType(t: number): t is GgufValueType {
  return Number.isInteger(t) && t >= GgufValueType.UINT8 && t <= GgufValueType.FLOAT64;
}

function readValue(c: HeaderCursor, type: GgufValueType, field: string, depth: number): GgufValue {
  switch (type) {
    case GgufValueType.UINT8: return c.u8(field);
    case GgufValueType.INT8: return c.i8(field);
    case GgufValueType.UINT16: return c.u16(field);
    case GgufValueType.INT16: return c.i16(field);
    case GgufValueType.UINT32: return c.u32(field);
    case GgufValueType.INT32: return c.i32(field);
    case GgufValueType.FLOAT32: return c.f32(field);
    case GgufValueType.FLOAT64: return c.f64(field);
    case GgufValueType.UINT64: return c.u64(field);
    case GgufValueType.INT64: return c.i64(field);
    case GgufValueType.BOOL: {
      const at = c.pos;
      const b = c.u8(field);
      if (b > 1) throw c.error(at, field, `bool must be 0 or 1, got ${b}`);
      return b === 1;
    }
    case GgufValueType.STRING: return c.string(field);
    case GgufValueType.ARRAY: return readArray(c, field, depth + 1);
  }
}

function readArray(c: HeaderCursor, field: string, depth: number): GgufArray {
  const typeAt = c.pos;
  const itemType = c.u32(`${field} array item type`);
  if (!isValueType(itemType)) throw c.error(typeAt, `${field} array item type`, `unknown GGUF value type ${itemType}`);
  if (depth > MAX_ARRAY_DEPTH) {
    throw c.error(typeAt, field, `arrays nested more than ${MAX_ARRAY_DEPTH} deep`);
  }
  const countAt = c.pos;
  const n = c.count(`${field} array count`, MIN_VALUE_BYTES[itemType], `array of ${GgufValueType[itemType]} count`);
  if (n > MAX_ARRAY_ITEMS) throw c.error(countAt, `${field} array count`, `${n} items exceed the limit of ${MAX_ARRAY_ITEMS} per array`);
  const items: GgufValue[] = new Array<GgufValue>(n);
  let i = 0;
  try {
    // Items are read under the array's field name (building "key[i]" per item would cost more
    // than reading it); a failure is renamed to the item here, off the hot path.
    for (; i < n; i++) items[i] = readValue(c, itemType, field, depth);
  } catch (e) {
    if (e instanceof GgufFormatError && e.field.startsWith(field)) {
      throw c.error(e.offset, `${field}[${i}]${e.field.slice(field.length)}`, e.problem);
    }
    throw e;
  }
  return { itemType, items };
}

function readVersion(c: HeaderCursor): number {
  const magic = c.bytes(4, 'magic');
  if (!magic.equals(GGUF_MAGIC)) {
    throw c.error(0, 'magic', `expected "GGUF" (47 47 55 46), got ${[...magic].map((b) => b.toString(16).padStart(2, '0')).join(' ')}`);
  }
  const version = c.u32('version');
  if (version === 2 || version === 3) return version;
  if (version === 1) throw c.error(4, 'version', 'GGUF version 1 is not supported (only versions 2 and 3)');
  const swapped = ((version & 0xff) << 24 | (version & 0xff00) << 8 | (version >>> 8) & 0xff00 | version >>> 24) >>> 0;
  if (swapped >= 1 && swapped <= 3) {
    throw c.error(4, 'version', `file is big-endian (version ${swapped} with its bytes swapped); only little-endian GGUF is supported`);
  }
  throw c.error(4, 'version', `unsupported GGUF version ${version} (only versions 2 and 3)`);
}

function readKvs(c: HeaderCursor, count: number): Map<string, GgufKv> {
  const kv = new Map<string, GgufKv>();
  for (let i = 0; i < count; i++) {
    const offset = c.pos;
    const key = c.string(`metadata #${i} key`);
    if (key.length === 0) throw c.error(offset, `metadata #${i} key`, 'key is empty');
    if (kv.has(key)) throw c.error(offset, `metadata "${key}"`, `duplicate key (first at byte ${kv.get(key)!.offset})`);
    const typeAt = c.pos;
    const type = c.u32(`metadata "${key}" type`);
    if (!isValueType(type)) throw c.error(typeAt, `metadata "${key}" type`, `unknown GGUF value type ${type}`);
    const value = readValue(c, type, `metadata "${key}"`, 0);
    kv.set(key, { key, type, value, offset });
  }
  return kv;
}

function readAlignment(c: HeaderCursor, kv: Map<string, GgufKv>): number {
  const entry = kv.get('general.alignment');
  if (!entry) return DEFAULT_ALIGNMENT;
  const field = 'metadata "general.alignment"';
  const v = entry.value;
  if (typeof v !== 'number' && typeof v !== 'bigint') {
    throw c.error(entry.offset, field, `must be an integer, got a ${GgufValueType[entry.type]}`);
  }
  const n = typeof v === 'bigint' ? (v <= MAX_SAFE && v >= 0n ? Number(v) : -1) : v;
  if (!Number.isInteger(n) || n <= 0 || n > 2 ** 30 || (n & (n - 1)) !== 0) {
    throw c.error(entry.offset, field, `must be a nonzero power of two (at most 2^30), got ${v}`);
  }
  return n;
}

interface PendingTensor {
  info: GgufTensorInfo;
  /** Where the tensor's offset field is (for error messages). */
  offsetAt: number;
}

function readTensorInfo(c: HeaderCursor, index: number, alignment: number, names: Map<string, number>): PendingTensor {
  const infoAt = c.pos;
  const name = c.string(`tensor #${index} name`);
  if (name.length === 0) throw c.error(infoAt, `tensor #${index} name`, 'name is empty');
  const first = names.get(name);
  if (first !== undefined) throw c.error(infoAt, `tensor "${name}"`, `duplicate tensor name (first at byte ${first})`);
  names.set(name, infoAt);

  const nDimsAt = c.pos;
  const nDims = c.u32(`tensor "${name}" n_dims`);
  if (nDims > MAX_DIMS) throw c.error(nDimsAt, `tensor "${name}" n_dims`, `n_dims is ${nDims}, at most ${MAX_DIMS} allowed`);
  const dims: number[] = [];
  let elements = 1n;
  for (let d = 0; d < nDims; d++) {
    const dimAt = c.pos;
    const field = `tensor "${name}" dims[${d}]`;
    const dim = c.u64(field);
    if (dim === 0n) throw c.error(dimAt, field, 'dimension is 0');
    elements *= dim;
    if (elements > MAX_SAFE) {
      throw c.error(dimAt, field, `element count overflows 2^53 (dims so far: ${[...dims, dim].join(' x ')})`);
    }
    dims.push(Number(dim));
  }

  const typeAt = c.pos;
  const typeId = c.u32(`tensor "${name}" type`);
  const typeInfo = ggmlTypeInfo(typeId);
  if (!typeInfo) throw c.error(typeAt, `tensor "${name}" type`, `unknown ggml type id ${typeId}`);
  const rowElements = dims[0] ?? 1;
  if (rowElements % typeInfo.blockSize !== 0) {
    throw c.error(nDimsAt + 4, `tensor "${name}" dims[0]`,
      `first dimension ${rowElements} is not a multiple of ${typeInfo.name}'s block size ${typeInfo.blockSize}`);
  }
  const nElements = Number(elements);
  const byteSize = (nElements / typeInfo.blockSize) * typeInfo.typeSize;
  if (byteSize > c.fileSize) {
    throw c.error(nDimsAt + 4, `tensor "${name}" dims`,
      `${dims.join(' x ')} ${ggmlTypeName(typeId)} needs ${byteSize} bytes, more than the whole file (${c.fileSize} bytes)`);
  }

  const offsetAt = c.pos;
  const rel = c.u64(`tensor "${name}" offset`);
  if (rel > BigInt(c.fileSize)) {
    throw c.error(offsetAt, `tensor "${name}" offset`, `data offset ${rel} is beyond the end of the file (${c.fileSize} bytes)`);
  }
  const relOffset = Number(rel);
  if (relOffset % alignment !== 0) {
    throw c.error(offsetAt, `tensor "${name}" offset`, `data offset ${relOffset} is not a multiple of the alignment ${alignment}`);
  }
  return {
    info: { name, dims, type: typeId, relOffset, absOffset: 0, nElements, byteSize },
    offsetAt,
  };
}

/** Places the tensors in the data section and checks they lie inside the file and do not overlap. */
function placeTensors(c: HeaderCursor, pending: PendingTensor[], dataOffset: number): void {
  for (const p of pending) {
    p.info.absOffset = dataOffset + p.info.relOffset;
    const end = p.info.absOffset + p.info.byteSize;
    if (end > c.fileSize) {
      throw c.error(p.offsetAt, `tensor "${p.info.name}" offset`,
        `data [${p.info.absOffset}, ${end}) extends past the end of the file (${c.fileSize} bytes)`);
    }
  }
  const byOffset = [...pending].sort((a, b) => a.info.relOffset - b.info.relOffset);
  for (let i = 1; i < byOffset.length; i++) {
    const prev = byOffset[i - 1]!.info;
    const cur = byOffset[i]!;
    if (prev.relOffset + prev.byteSize > cur.info.relOffset) {
      throw c.error(cur.offsetAt, `tensor "${cur.info.name}" offset`,
        `data at relative offset ${cur.info.relOffset} overlaps tensor "${prev.name}" ` +
        `(relative bytes [${prev.relOffset}, ${prev.relOffset + prev.byteSize}))`);
    }
  }
}

/** Reads and validates a GGUF v2/v3 little-endian header. Tensor data is not read. */
export function readGguf(path: string, opts: ReadGgufOptions = {}): GgufFile {
  const limit = opts.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES;
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    // Node's own message ("ENOENT: no such file or directory, open") names no file on some calls.
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory, not a GGUF file' : (e as Error).message;
    throw new Error(`cannot open model ${path}: ${why}`);
  }
  try {
    const st = fstatSync(fd);
    // Opening a directory succeeds on Linux; reading it fails with EISDIR and no path.
    if (st.isDirectory()) throw new Error(`cannot read model ${path}: it is a directory, not a GGUF file`);
    const fileSize = st.size;
    const c = new HeaderCursor(fd, path, fileSize, limit);
    const version = readVersion(c);
    const tensorCount = c.count('tensor count', MIN_TENSOR_INFO_BYTES, 'tensor count');
    const kvCount = c.count('metadata count', MIN_KV_BYTES, 'metadata count');
    if ((tensorCount * MIN_TENSOR_INFO_BYTES) + (kvCount * MIN_KV_BYTES) > c.remaining()) {
      throw c.error(8, 'tensor count', `${tensorCount} tensors and ${kvCount} metadata entries cannot fit in the ${c.remaining()} bytes left`);
    }
    const kv = readKvs(c, kvCount);
    const alignment = readAlignment(c, kv);
    const names = new Map<string, number>();
    const pending: PendingTensor[] = [];
    for (let i = 0; i < tensorCount; i++) pending.push(readTensorInfo(c, i, alignment, names));
    const dataOffset = Math.ceil(c.pos / alignment) * alignment;
    placeTensors(c, pending, dataOffset);
    return { path, version, fileSize, alignment, kv, tensors: pending.map((p) => p.info), dataOffset };
  } finally {
    closeSync(fd);
  }
}
