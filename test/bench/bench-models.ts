// Synthetic benchmark models of realistic shapes, written once into a cache directory outside
// the repository (model files never go into the tree) and reused across runs.
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { GgmlType, ggmlTypeInfo, ggmlTypeName } from '../../engine/model/ggml-types';
import { storedType, writeSyntheticModel, type SyntheticModelSpec } from '../../engine/model/synthetic';

export interface BenchShape {
  label: string;
  spec: Omit<SyntheticModelSpec, 'weightType'>;
}

const common = { architecture: 'llama' as const, nVocab: 32000, contextLength: 4096, seed: 2024 };

export const BENCH_SHAPES: BenchShape[] = [
  { label: '0.5B', spec: { ...common, nLayers: 24, nEmbd: 896, nHeads: 14, nKvHeads: 2, nFf: 4864 } },
  { label: '1.3B', spec: { ...common, nLayers: 24, nEmbd: 2048, nHeads: 16, nKvHeads: 16, nFf: 5504 } },
];

export const BENCH_TYPES: GgmlType[] = [GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_K];

export function benchCacheDir(): string {
  return process.env.FULCRUM_BENCH_CACHE ?? path.join(tmpdir(), 'fulcrum-bench-models');
}

/**
 * Why a shape cannot be stored in a format (rows not a multiple of the block), or undefined.
 * K-quant models store matrices whose rows are not a multiple of 256 in llama.cpp's fallback type
 * (Q4_K -> Q5_0 ...; see storedType), so only that type's block has to divide the rows.
 */
export function unsupportedReason(shape: BenchShape, type: GgmlType): string | undefined {
  for (const cols of [shape.spec.nEmbd, shape.spec.nFf]) {
    const stored = storedType(type, cols);
    const block = ggmlTypeInfo(stored)?.blockSize ?? 1;
    if (cols % block !== 0) return `rows of ${cols} values are not a multiple of the ${ggmlTypeName(stored)} block of ${block}`;
  }
  return undefined;
}

/** Path of the cached model file, writing it first when missing. */
export function benchModelFile(shape: BenchShape, type: GgmlType): string {
  const dir = benchCacheDir();
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `synthetic-${shape.label}-${ggmlTypeName(type)}.gguf`);
  if (!existsSync(file)) {
    const tmp = `${file}.${process.pid}.partial`;
    writeSyntheticModel(tmp, { ...shape.spec, weightType: type, name: `synthetic-${shape.label}` });
    renameSync(tmp, file);
  }
  return file;
}
