// Reads a `--costs FILE`: a measured per-operation cost table for one decoder layer, as paper
// 000's tables give it: {"unit":"ms","ops":[{"name":"Q","cpu":5.775,"gpu":0.323,"h2d":4.214,
// "dc":0,"s2d":0},…]} in execution order. A missing field means "not measured".

import { readFileSync } from 'node:fs';
import type { LayerCostTable, OpKind, OpTimes } from './types';

const FIELDS = ['cpu', 'gpu', 'h2d', 'dc', 's2d'] as const;
/** Decision: a decoder layer has 11–13 ops; 256 leaves room for fine intra-op chunking while
 * keeping the split search (O(n²) pairs) instant. */
const MAX_OPS = 256;

/** Op kind from a user's op name (paper 000's OPT names and Fulcrum's names). */
export function kindOfOpName(name: string): OpKind {
  const n = name.toLowerCase().replace(/[^a-z0-9]/g, '');
  const table: Record<string, OpKind> = {
    ln0: 'norm', ln1: 'norm', attnnorm: 'norm', ffnnorm: 'norm', norm: 'norm', q: 'q', k: 'k', v: 'v', rope: 'rope',
    scores: 'scores', softmax: 'softmax', wv: 'wv', output: 'out', out: 'out', gate: 'gate', up: 'up', down: 'down',
    fc0: 'fc1', fc1: 'fc2', lmhead: 'lm_head',
  };
  // OPT naming in paper 000: FC.0 is the first FFN matrix, FC.1 the second.
  const base = n.replace(/chunk\d+$/, '');
  return table[base] ?? 'custom';
}

/** Parses and validates a costs table; errors name the file, op index and field. */
export function parseCostsJson(text: string, where: string): LayerCostTable {
  let raw: unknown;
  try { raw = JSON.parse(text); } catch (e) { throw new Error(`${where}: not valid JSON (${(e as Error).message})`); }
  if (typeof raw !== 'object' || raw === null) throw new Error(`${where}: expected an object with "unit" and "ops"`);
  const obj = raw as Record<string, unknown>;
  if (obj.unit !== 'ms') throw new Error(`${where}: field "unit" must be "ms", got ${JSON.stringify(obj.unit)}`);
  if (!Array.isArray(obj.ops) || obj.ops.length === 0) throw new Error(`${where}: field "ops" must be a non-empty array`);
  if (obj.ops.length > MAX_OPS) throw new Error(`${where}: "ops" has ${obj.ops.length} entries, limit ${MAX_OPS}`);
  const seen = new Set<string>();
  const ops: OpTimes[] = obj.ops.map((o: unknown, i: number) => {
    if (typeof o !== 'object' || o === null) throw new Error(`${where}: ops[${i}] must be an object`);
    const r = o as Record<string, unknown>;
    if (typeof r.name !== 'string' || !r.name) throw new Error(`${where}: ops[${i}].name must be a non-empty string`);
    if (seen.has(r.name)) throw new Error(`${where}: ops[${i}].name "${r.name}" appears twice (names identify ops)`);
    seen.add(r.name);
    const t: OpTimes = { name: r.name, kind: kindOfOpName(r.name) };
    for (const f of FIELDS) {
      const v = r[f];
      if (v === undefined || v === null) continue;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 1e9) {
        throw new Error(`${where}: ops[${i}] (${r.name}).${f} must be a finite number ≥ 0 (ms), got ${JSON.stringify(v)}`);
      }
      t[f] = v;
    }
    for (const k of Object.keys(r)) {
      if (k !== 'name' && !(FIELDS as readonly string[]).includes(k)) throw new Error(`${where}: ops[${i}] (${r.name}) has unknown field "${k}" (known: name, ${FIELDS.join(', ')})`);
    }
    // For attention ops the h2d entry is the KV cache (paper 000 §2.1).
    if ((t.kind === 'scores' || t.kind === 'wv') && t.h2d !== undefined) t.h2dKv = t.h2d;
    return t;
  });
  // A table with no time at all would plan every op at 0 ms: refuse it rather than predict nothing.
  if (!ops.some((o) => FIELDS.some((f) => o[f] !== undefined))) {
    throw new Error(`${where}: no op has a time (fields ${FIELDS.join(', ')}); a cost table needs at least the measured cpu or gpu times`);
  }
  if (!ops.some((o) => (o.cpu ?? 0) > 0 || (o.gpu ?? 0) > 0)) {
    throw new Error(`${where}: every cpu and gpu time is 0 or missing; a cost table needs compute times`);
  }
  return { unit: 'ms', ops, source: where };
}

export function readCostsFile(path: string): LayerCostTable {
  let text: string;
  try { text = readFileSync(path, 'utf8'); } catch (e) { throw new Error(`--costs ${path}: cannot read (${(e as Error).message})`); }
  if (text.length > 16 * 1024 * 1024) throw new Error(`--costs ${path}: file is ${text.length} bytes, limit 16 MiB`);
  return parseCostsJson(text, path);
}
