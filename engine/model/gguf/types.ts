// The in-memory form of a GGUF file's header: metadata key/values and tensor infos.
// Tensor data is not read here; the native addon memory-maps it (see engine/native).

import type { GgmlType } from '../ggml-types';

export enum GgufValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

/** 64-bit integers are bigint; every other number is a JS number. */
export type GgufValue = number | bigint | boolean | string | GgufArray;

export interface GgufArray {
  itemType: GgufValueType;
  /** Items; nested arrays are GgufArray again. */
  items: GgufValue[];
}

export interface GgufKv {
  key: string;
  type: GgufValueType;
  value: GgufValue;
  /** Byte offset of the key's length field in the file (for error messages). */
  offset: number;
}

export interface GgufTensorInfo {
  name: string;
  /** Dimensions, innermost (contiguous) first, as GGUF stores them. */
  dims: number[];
  type: GgmlType;
  /** Offset of the tensor's data relative to the start of the data section. */
  relOffset: number;
  /** Absolute offset of the tensor's data in the file. */
  absOffset: number;
  nElements: number;
  byteSize: number;
}

export interface GgufFile {
  path: string;
  version: number;
  fileSize: number;
  alignment: number;
  kv: Map<string, GgufKv>;
  tensors: GgufTensorInfo[];
  /** Absolute offset where the tensor data section starts. */
  dataOffset: number;
}

/** Every malformed-file error names the file, the byte offset and the field. */
export class GgufFormatError extends Error {
  constructor(
    readonly file: string,
    readonly offset: number,
    readonly field: string,
    readonly problem: string,
  ) {
    super(`${file}: invalid GGUF at byte ${offset} (${field}): ${problem}`);
    this.name = 'GgufFormatError';
  }
}
