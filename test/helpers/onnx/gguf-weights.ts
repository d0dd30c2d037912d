// Reads a GGUF tensor's bytes straight from the file (at its absolute offset) and dequantizes
// them to float32 in TypeScript, independently of the native addon, for the ONNX reference.
import { closeSync, openSync, readSync } from 'node:fs';

import { GgmlType, ggmlTypeName } from '../../../engine/model/ggml-types';
import type { GgufFile, GgufTensorInfo } from '../../../engine/model/gguf';
import { dequantizeQ8_0, f16BitsToF32 } from '../../../engine/model/quantize-ts';

/** The weight formats the reference can dequantize. */
export const REFERENCE_WEIGHT_TYPES: readonly GgmlType[] = [GgmlType.F32, GgmlType.F16, GgmlType.Q8_0];

export function readTensorBytes(file: GgufFile, t: GgufTensorInfo): Uint8Array {
  if (t.absOffset + t.byteSize > file.fileSize) {
    throw new Error(`${file.path}: tensor '${t.name}' bytes [${t.absOffset}, ${t.absOffset + t.byteSize}) run past the file end ${file.fileSize}`);
  }
  const out = new Uint8Array(t.byteSize);
  const fd = openSync(file.path, 'r');
  try {
    let done = 0;
    while (done < out.length) {
      const n = readSync(fd, out, done, out.length - done, t.absOffset + done);
      if (n === 0) throw new Error(`${file.path}: tensor '${t.name}': unexpected end of file at byte ${t.absOffset + done}`);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
  return out;
}

/** The tensor's values as float32, in GGUF order (innermost dimension contiguous). */
export function dequantizeTensor(file: GgufFile, t: GgufTensorInfo): Float32Array {
  const bytes = readTensorBytes(file, t);
  switch (t.type) {
    case GgmlType.F32:
      return new Float32Array(bytes.buffer, bytes.byteOffset, t.nElements);
    case GgmlType.F16: {
      const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, t.nElements);
      const out = new Float32Array(t.nElements);
      for (let i = 0; i < out.length; i++) out[i] = f16BitsToF32(bits[i]!);
      return out;
    }
    case GgmlType.Q8_0:
      return dequantizeQ8_0(bytes);
    default:
      throw new Error(`${file.path}: tensor '${t.name}' has type ${ggmlTypeName(t.type)}; the ONNX reference reads only F32, F16 and Q8_0`);
  }
}
