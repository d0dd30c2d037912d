// GGUF: the reader, the writer, and typed accessors for metadata values and tensors.
// The accessors throw GgufMetadataError naming the file and key when a required key is
// missing or holds the wrong type, so callers never hand-check value types.

import {
  GgufValueType,
  type GgufArray,
  type GgufFile,
  type GgufKv,
  type GgufTensorInfo,
  type GgufValue,
} from './types';

export * from './types';
export { readGguf, DEFAULT_MAX_HEADER_BYTES, type ReadGgufOptions } from './reader';
export { writeGguf, encodeGgufHeader, type GgufWriteSpec, type GgufWriteKv, type GgufWriteTensor, type GgufLayout } from './writer';

/** A metadata key that is missing, has the wrong type, or holds a value the caller cannot use. */
export class GgufMetadataError extends Error {
  constructor(
    readonly file: string,
    readonly key: string,
    readonly problem: string,
  ) {
    super(`${file}: GGUF metadata key '${key}': ${problem}`);
    this.name = 'GgufMetadataError';
  }
}


function typeName(kv: GgufKv): string {
  if (kv.type === GgufValueType.ARRAY) {
    const arr = kv.value as GgufArray;
    return `array of ${GgufValueType[arr.itemType]}`;
  }
  return GgufValueType[kv.type] ?? `type ${kv.type}`;
}

function wrongType(file: GgufFile, kv: GgufKv, expected: string): GgufMetadataError {
  return new GgufMetadataError(file.path, kv.key, `expected ${expected}, found ${typeName(kv)} (entry at byte ${kv.offset})`);
}

function required(file: GgufFile, key: string): GgufKv {
  const kv = file.kv.get(key);
  if (!kv) throw new GgufMetadataError(file.path, key, 'required key is missing');
  return kv;
}

/** True when the key exists. */
export function metaHas(file: GgufFile, key: string): boolean {
  return file.kv.has(key);
}

/** The raw value of a key, or undefined. */
export function metaValue(file: GgufFile, key: string): GgufValue | undefined {
  return file.kv.get(key)?.value;
}

export function metaOptionalString(file: GgufFile, key: string): string | undefined {
  const kv = file.kv.get(key);
  if (!kv) return undefined;
  if (typeof kv.value !== 'string') throw wrongType(file, kv, 'a string');
  return kv.value;
}

export function metaString(file: GgufFile, key: string): string {
  const v = metaOptionalString(file, key);
  if (v === undefined) throw new GgufMetadataError(file.path, key, 'required key is missing');
  return v;
}

/** Any numeric value type as a JS number; 64-bit integers must be within 2^53. */
export function metaOptionalNumber(file: GgufFile, key: string): number | undefined {
  const kv = file.kv.get(key);
  if (!kv) return undefined;
  if (typeof kv.value === 'number') return kv.value;
  if (typeof kv.value === 'bigint') {
    if (kv.value > BigInt(Number.MAX_SAFE_INTEGER) || kv.value < -BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new GgufMetadataError(file.path, key, `value ${kv.value} is outside the exactly representable range (2^53)`);
    }
    return Number(kv.value);
  }
  throw wrongType(file, kv, 'a number');
}

export function metaNumber(file: GgufFile, key: string): number {
  const v = metaOptionalNumber(file, key);
  if (v === undefined) throw new GgufMetadataError(file.path, key, 'required key is missing');
  return v;
}

/** A number that must be an integer in [min, max]. */
export function metaInteger(file: GgufFile, key: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const v = metaNumber(file, key);
  checkInteger(file, key, v, min, max);
  return v;
}

export function metaOptionalInteger(file: GgufFile, key: string, min = 0, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = metaOptionalNumber(file, key);
  if (v !== undefined) checkInteger(file, key, v, min, max);
  return v;
}

function checkInteger(file: GgufFile, key: string, v: number, min: number, max: number): void {
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new GgufMetadataError(file.path, key, `expected an integer in [${min}, ${max}], got ${v}`);
  }
}

export function metaOptionalBool(file: GgufFile, key: string): boolean | undefined {
  const kv = file.kv.get(key);
  if (!kv) return undefined;
  if (typeof kv.value !== 'boolean') throw wrongType(file, kv, 'a bool');
  return kv.value;
}

export function metaBool(file: GgufFile, key: string): boolean {
  const v = metaOptionalBool(file, key);
  if (v === undefined) throw new GgufMetadataError(file.path, key, 'required key is missing');
  return v;
}

export function metaOptionalArray(file: GgufFile, key: string): GgufArray | undefined {
  const kv = file.kv.get(key);
  if (!kv) return undefined;
  if (kv.type !== GgufValueType.ARRAY) throw wrongType(file, kv, 'an array');
  return kv.value as GgufArray;
}

export function metaArray(file: GgufFile, key: string): GgufArray {
  return metaOptionalArray(file, key) ?? (required(file, key).value as GgufArray);
}

/** An array of strings (e.g. tokenizer.ggml.tokens). */
export function metaOptionalStringArray(file: GgufFile, key: string): string[] | undefined {
  const arr = metaOptionalArray(file, key);
  if (!arr) return undefined;
  if (arr.itemType !== GgufValueType.STRING) throw wrongType(file, file.kv.get(key)!, 'an array of STRING');
  return arr.items as string[];
}

export function metaStringArray(file: GgufFile, key: string): string[] {
  const v = metaOptionalStringArray(file, key);
  if (v === undefined) throw new GgufMetadataError(file.path, key, 'required key is missing');
  return v;
}

/** An array of any numeric item type as JS numbers (64-bit items must be within 2^53). */
export function metaOptionalNumberArray(file: GgufFile, key: string): number[] | undefined {
  const arr = metaOptionalArray(file, key);
  if (!arr) return undefined;
  const t = arr.itemType;
  if (t === GgufValueType.STRING || t === GgufValueType.ARRAY || t === GgufValueType.BOOL) {
    throw wrongType(file, file.kv.get(key)!, 'an array of numbers');
  }
  if (t !== GgufValueType.UINT64 && t !== GgufValueType.INT64) return arr.items as number[];
  return (arr.items as bigint[]).map((b, i) => {
    if (b > BigInt(Number.MAX_SAFE_INTEGER) || b < -BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new GgufMetadataError(file.path, key, `item ${i} = ${b} is outside the exactly representable range (2^53)`);
    }
    return Number(b);
  });
}

export function metaNumberArray(file: GgufFile, key: string): number[] {
  const v = metaOptionalNumberArray(file, key);
  if (v === undefined) throw new GgufMetadataError(file.path, key, 'required key is missing');
  return v;
}

/** Tensor infos by name (built once per call; callers that look up many names keep the map). */
export function tensorMap(file: GgufFile): Map<string, GgufTensorInfo> {
  return new Map(file.tensors.map((t) => [t.name, t]));
}

export function findTensor(file: GgufFile, name: string): GgufTensorInfo | undefined {
  return file.tensors.find((t) => t.name === name);
}
