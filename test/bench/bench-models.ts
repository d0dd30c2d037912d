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
  // A small Qwen3-MoE (Qwen3-Coder-30B-A3B's architecture at 1/16 of its experts' width): 1.6B
  // parameters, 0.2B active per token (8 of 64 experts of 768).
  { label: 'MoE-1.6B-A0.2B', spec: { ...common, architecture: 'qwen3moe', nLayers: 16, nEmbd: 1024, nHeads: 16, nKvHeads: 4, headDim: 64, nFf: 768, nExpert: 64, nExpertUsed: 8 } },
];

/** A benchmark model's weight format: one type for every matrix, or a per-tensor mix. */
export interface BenchType {
  label: string;
  type: GgmlType;
  tensorType?: (name: string) => GgmlType | undefined;
}

/**
 * llama.cpp's Q4_K_M and Q5_K_M: Q4_K or Q5_K, with attn_v and ffn_down in Q6_K in the layers its
 * use_more_bits picks (the first and last eighth of the layers and every third one between) and
 * the output matrix in Q6_K.
 */
function kMTensorType(nLayers: number): (name: string) => GgmlType | undefined {
  const moreBits = (i: number): boolean => i < nLayers / 8 || i >= (7 * nLayers) / 8 || (i - Math.floor(nLayers / 8)) % 3 === 2;
  return (name) => {
    if (name === 'output.weight') return GgmlType.Q6_K;
    const m = /^blk\.(\d+)\.(attn_v|ffn_down)\.weight$/.exec(name);
    return m && moreBits(Number(m[1])) ? GgmlType.Q6_K : undefined;
  };
}

const plain = (type: GgmlType): BenchType => ({ label: ggmlTypeName(type), type });
/** The _M mixes (kMTensorType) over their base type. */
const MIXES: Record<string, GgmlType> = { Q4_K_M: GgmlType.Q4_K, Q5_K_M: GgmlType.Q5_K };
/** The types bench:cpu runs by default, then the others it takes by label (--types). */
export const BENCH_TYPES: BenchType[] = [plain(GgmlType.Q8_0), plain(GgmlType.Q4_0), plain(GgmlType.Q4_K), { label: 'Q4_K_M', type: GgmlType.Q4_K }];
const OTHER_TYPES: BenchType[] = [{ label: 'Q5_K_M', type: GgmlType.Q5_K }];

/** Every label --types takes besides GGML type names. */
export const BENCH_TYPE_LABELS: string[] = [...BENCH_TYPES, ...OTHER_TYPES].map((t) => t.label);

/** The benchmark type of that label (a GGML type name, Q4_K_M or Q5_K_M), or undefined. */
export function benchTypeByLabel(label: string): BenchType | undefined {
  return [...BENCH_TYPES, ...OTHER_TYPES].find((t) => t.label === label);
}

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
export function benchModelFile(shape: BenchShape, type: GgmlType | BenchType): string {
  const bt = typeof type === 'number' ? plain(type) : type;
  const dir = benchCacheDir();
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `synthetic-${shape.label}-${bt.label}.gguf`);
  if (!existsSync(file)) {
    const tmp = `${file}.${process.pid}.partial`;
    const tensorType = MIXES[bt.label] !== undefined ? kMTensorType(shape.spec.nLayers) : undefined;
    writeSyntheticModel(tmp, { ...shape.spec, weightType: bt.type, tensorType, name: `synthetic-${shape.label}` });
    renameSync(tmp, file);
  }
  return file;
}
