// Finds tensors whose stored numbers are not finite (NaN, ±Inf): a damaged download or a broken
// conversion. A model with such weights still loads and "runs", producing NaN logits that a
// sampler turns into one fixed token ("!!!!" as ghost text), so the loader checks what is cheap
// and `fulcrum inspect --check` checks everything.
//
// What is read: F32/F16/BF16 values one by one; for block formats the block's float scales (f16
// `d`, and `dmin`/`m` where the format has one) — a corrupted scale makes its whole block
// non-finite, and the quantized integers themselves cannot be non-finite.
import { closeSync, openSync, readSync } from 'node:fs';
import { GgmlType } from '../ggml-types';
import type { GgufFile, GgufTensorInfo } from './types';

/** Byte offsets of the f16 scales within one block, per block format. */
const SCALE_OFFSETS: Partial<Record<GgmlType, { blockBytes: number; offsets: number[] }>> = {
  [GgmlType.Q4_0]: { blockBytes: 18, offsets: [0] },
  [GgmlType.Q4_1]: { blockBytes: 20, offsets: [0, 2] },
  [GgmlType.Q5_0]: { blockBytes: 22, offsets: [0] },
  [GgmlType.Q5_1]: { blockBytes: 24, offsets: [0, 2] },
  [GgmlType.Q8_0]: { blockBytes: 34, offsets: [0] },
  [GgmlType.Q2_K]: { blockBytes: 84, offsets: [80, 82] },
  [GgmlType.Q3_K]: { blockBytes: 110, offsets: [108] },
  [GgmlType.Q4_K]: { blockBytes: 144, offsets: [0, 2] },
  [GgmlType.Q5_K]: { blockBytes: 176, offsets: [0, 2] },
  [GgmlType.Q6_K]: { blockBytes: 210, offsets: [208] },
};

export interface NonFiniteTensor {
  name: string;
  type: string;
  /** Non-finite values (or scales) found, and the index of the first one (element or block). */
  count: number;
  firstIndex: number;
  /** 'value' for float tensors, 'block scale' for block formats. */
  unit: 'value' | 'block scale';
  /** Absolute file offset of the first bad value or scale. */
  offset: number;
}

/** f16 bits with exponent all ones are Inf or NaN. */
function f16NonFinite(bits: number): boolean { return (bits & 0x7c00) === 0x7c00; }
/** bf16 is the top half of an f32: exponent all ones is Inf or NaN. */
function bf16NonFinite(bits: number): boolean { return (bits & 0x7f80) === 0x7f80; }

const CHUNK = 8 << 20;

/**
 * Scans `tensors` of `file` (default: every tensor) and returns those with non-finite numbers.
 * `maxBytes`: skip a tensor larger than this (the loader's cheap check); default no limit.
 */
export function findNonFiniteTensors(file: GgufFile, opts: { tensors?: GgufTensorInfo[]; maxBytes?: number } = {}): NonFiniteTensor[] {
  const out: NonFiniteTensor[] = [];
  const fd = openSync(file.path, 'r');
  const buf = Buffer.allocUnsafe(CHUNK);
  try {
    for (const t of opts.tensors ?? file.tensors) {
      if (opts.maxBytes !== undefined && t.byteSize > opts.maxBytes) continue;
      const found = scanTensor(fd, buf, t);
      if (found) out.push(found);
    }
  } finally {
    closeSync(fd);
  }
  return out;
}

function scanTensor(fd: number, buf: Buffer, t: GgufTensorInfo): NonFiniteTensor | undefined {
  const blocks = SCALE_OFFSETS[t.type];
  let unitBytes: number;
  let bad: (b: Buffer, at: number) => boolean;
  let unit: NonFiniteTensor['unit'] = 'value';
  let typeName: string;
  switch (t.type) {
    case GgmlType.F32: unitBytes = 4; typeName = 'F32'; bad = (b, at) => { const v = b.readFloatLE(at); return v - v !== 0; }; break;
    case GgmlType.F16: unitBytes = 2; typeName = 'F16'; bad = (b, at) => f16NonFinite(b.readUInt16LE(at)); break;
    case GgmlType.BF16: unitBytes = 2; typeName = 'BF16'; bad = (b, at) => bf16NonFinite(b.readUInt16LE(at)); break;
    default:
      if (!blocks) return undefined; // a format whose scales this check does not know: not checked
      unitBytes = blocks.blockBytes; unit = 'block scale'; typeName = GgmlType[t.type] ?? String(t.type);
      bad = (b, at) => blocks.offsets.some((o) => f16NonFinite(b.readUInt16LE(at + o)));
  }
  // Whole units per chunk, so no unit straddles two reads.
  const perChunk = Math.floor(CHUNK / unitBytes) * unitBytes;
  let count = 0, firstIndex = -1;
  for (let done = 0; done < t.byteSize; done += perChunk) {
    const want = Math.min(perChunk, t.byteSize - done);
    let got = 0;
    while (got < want) {
      const n = readSync(fd, buf, got, want - got, t.absOffset + done + got);
      if (n <= 0) break;
      got += n;
    }
    for (let at = 0; at + unitBytes <= got; at += unitBytes) {
      if (bad(buf, at)) { count++; if (firstIndex < 0) firstIndex = (done + at) / unitBytes; }
    }
  }
  if (!count) return undefined;
  return { name: t.name, type: typeName, count, firstIndex, unit, offset: t.absOffset + firstIndex * unitBytes };
}

/** One line per damaged tensor, for errors and `inspect --check`. */
export function describeNonFinite(file: string, found: NonFiniteTensor[]): string {
  return found.map((f) => `tensor '${f.name}' (${f.type}) in ${file}: ${f.count} non-finite ${f.unit}${f.count === 1 ? '' : 's'}, the first at ${f.unit === 'value' ? 'element' : 'block'} ${f.firstIndex} (file offset ${f.offset})`).join('\n');
}
