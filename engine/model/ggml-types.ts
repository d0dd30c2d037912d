// The ggml tensor data types that GGUF files use, with the block layout of each.
// Numbering is ggml's (it is what GGUF files store); sizes follow the format definitions.

export enum GgmlType {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
}

export interface GgmlTypeInfo {
  type: GgmlType;
  name: string;
  /** Elements per block. */
  blockSize: number;
  /** Bytes per block. */
  typeSize: number;
  /** Whether Fulcrum's native kernels can compute with tensors of this type. */
  supported: boolean;
}

const table: GgmlTypeInfo[] = [
  { type: GgmlType.F32, name: 'F32', blockSize: 1, typeSize: 4, supported: true },
  { type: GgmlType.F16, name: 'F16', blockSize: 1, typeSize: 2, supported: true },
  { type: GgmlType.Q4_0, name: 'Q4_0', blockSize: 32, typeSize: 18, supported: true },
  { type: GgmlType.Q4_1, name: 'Q4_1', blockSize: 32, typeSize: 20, supported: true },
  { type: GgmlType.Q5_0, name: 'Q5_0', blockSize: 32, typeSize: 22, supported: true },
  { type: GgmlType.Q5_1, name: 'Q5_1', blockSize: 32, typeSize: 24, supported: true },
  { type: GgmlType.Q8_0, name: 'Q8_0', blockSize: 32, typeSize: 34, supported: true },
  { type: GgmlType.Q8_1, name: 'Q8_1', blockSize: 32, typeSize: 36, supported: false },
  { type: GgmlType.Q2_K, name: 'Q2_K', blockSize: 256, typeSize: 84, supported: false },
  { type: GgmlType.Q3_K, name: 'Q3_K', blockSize: 256, typeSize: 110, supported: false },
  { type: GgmlType.Q4_K, name: 'Q4_K', blockSize: 256, typeSize: 144, supported: true },
  { type: GgmlType.Q5_K, name: 'Q5_K', blockSize: 256, typeSize: 176, supported: true },
  { type: GgmlType.Q6_K, name: 'Q6_K', blockSize: 256, typeSize: 210, supported: true },
  { type: GgmlType.Q8_K, name: 'Q8_K', blockSize: 256, typeSize: 292, supported: false },
  { type: GgmlType.IQ2_XXS, name: 'IQ2_XXS', blockSize: 256, typeSize: 66, supported: false },
  { type: GgmlType.IQ2_XS, name: 'IQ2_XS', blockSize: 256, typeSize: 74, supported: false },
  { type: GgmlType.IQ3_XXS, name: 'IQ3_XXS', blockSize: 256, typeSize: 98, supported: false },
  { type: GgmlType.IQ1_S, name: 'IQ1_S', blockSize: 256, typeSize: 50, supported: false },
  { type: GgmlType.IQ4_NL, name: 'IQ4_NL', blockSize: 32, typeSize: 18, supported: false },
  { type: GgmlType.IQ3_S, name: 'IQ3_S', blockSize: 256, typeSize: 110, supported: false },
  { type: GgmlType.IQ2_S, name: 'IQ2_S', blockSize: 256, typeSize: 82, supported: false },
  { type: GgmlType.IQ4_XS, name: 'IQ4_XS', blockSize: 256, typeSize: 136, supported: false },
  { type: GgmlType.I8, name: 'I8', blockSize: 1, typeSize: 1, supported: false },
  { type: GgmlType.I16, name: 'I16', blockSize: 1, typeSize: 2, supported: false },
  { type: GgmlType.I32, name: 'I32', blockSize: 1, typeSize: 4, supported: false },
  { type: GgmlType.I64, name: 'I64', blockSize: 1, typeSize: 8, supported: false },
  { type: GgmlType.F64, name: 'F64', blockSize: 1, typeSize: 8, supported: false },
  { type: GgmlType.IQ1_M, name: 'IQ1_M', blockSize: 256, typeSize: 56, supported: false },
  { type: GgmlType.BF16, name: 'BF16', blockSize: 1, typeSize: 2, supported: true },
  { type: GgmlType.TQ1_0, name: 'TQ1_0', blockSize: 256, typeSize: 54, supported: false },
  { type: GgmlType.TQ2_0, name: 'TQ2_0', blockSize: 256, typeSize: 66, supported: false },
];

const byType = new Map<number, GgmlTypeInfo>(table.map((t) => [t.type, t]));
const byName = new Map<string, GgmlTypeInfo>(table.map((t) => [t.name, t]));

/** Layout of a ggml type, or undefined when the numeric id is not a known ggml type. */
export function ggmlTypeInfo(type: number): GgmlTypeInfo | undefined {
  return byType.get(type);
}

export function ggmlTypeByName(name: string): GgmlTypeInfo | undefined {
  return byName.get(name.toUpperCase());
}

export function ggmlTypeName(type: number): string {
  return byType.get(type)?.name ?? `unknown(${type})`;
}

/**
 * Bytes of a row-major tensor of `nElements` of `type`. The caller has checked that
 * nElements is a multiple of the block size; returns undefined otherwise.
 */
export function ggmlTensorBytes(type: number, nElements: number): number | undefined {
  const info = byType.get(type);
  if (!info || nElements % info.blockSize !== 0) return undefined;
  return (nElements / info.blockSize) * info.typeSize;
}
