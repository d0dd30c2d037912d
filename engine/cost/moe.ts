// Mixture-of-experts routing for the cost model: how many distinct experts a step reads, from
// uniform routing or from measured activation frequencies (`--expert-stats FILE`).
//
// Expert-stats file (JSON), written by a profiling run that counts the router's top-k choices:
//   {
//     "format": "fulcrum-expert-stats", "version": 1,
//     "model": "Qwen3-Coder-30B-A3B",          // free text, shown in the plan
//     "nExpert": 128, "nExpertUsed": 8,          // must match the model
//     "tokens": 20000,                           // tokens routed (prompt + generated)
//     "layers": [ { "layer": 0, "counts": [ …nExpert integers… ] }, … one entry per layer ]
//   }
// counts[e] = how many of the `tokens` tokens chose expert e in that layer (so Σ counts = k · tokens).
// A token's probability of using expert e is counts[e] / tokens.
//
// Decision: tokens route independently (one token's experts do not depend on its neighbours'),
// so a step of T tokens reads expert e with probability 1 − (1 − p_e)^T and the expected number
// of distinct experts is Σ_e 1 − (1 − p_e)^T; uniform routing (p_e = k/E) gives
// E · (1 − (1 − k/E)^T). Real neighbouring tokens share experts more often than that, so the
// figure is an upper bound on the bytes a batch reads.

import { readFileSync } from 'node:fs';
import { validateShape, type ModelShape, type MoeShape } from '../model/shape';
import type { GgufFile } from '../model/gguf/types';
import { metaInteger, metaOptionalInteger, metaOptionalString } from '../model/gguf';
import { ggmlTypeName } from '../model/ggml-types';

export const EXPERT_STATS_FORMAT = 'fulcrum-expert-stats';

export interface ExpertStatsFile {
  format: typeof EXPERT_STATS_FORMAT;
  version: 1;
  model?: string;
  nExpert: number;
  nExpertUsed: number;
  tokens: number;
  layers: { layer: number; counts: number[] }[];
}

/** Per-token routing probabilities of one layer's experts (sum k). */
export function layerActivation(moe: MoeShape, layer: number): number[] {
  const row = moe.activation?.[layer];
  if (row) return row;
  return new Array<number>(moe.nExpert).fill(moe.nExpertUsed / moe.nExpert);
}

/** Probability that a step of `tokens` tokens reads an expert used by a token with probability p. */
export function readProbability(p: number, tokens: number): number {
  return 1 - Math.pow(1 - Math.min(1, Math.max(0, p)), tokens);
}

/** Expected distinct experts read by `tokens` tokens, given per-token probabilities. */
export function expectedDistinct(probabilities: number[], tokens: number): number {
  let s = 0;
  for (const p of probabilities) s += readProbability(p, tokens);
  return s;
}

/** Expected distinct experts of a step averaged over layers (uniform: E · (1 − (1 − k/E)^T)). */
export function meanExpectedDistinct(shape: ModelShape, tokens: number): number {
  const moe = shape.moe!;
  if (!moe.activation) return moe.nExpert * (1 - Math.pow(1 - moe.nExpertUsed / moe.nExpert, tokens));
  let s = 0;
  for (let l = 0; l < shape.nLayers; l++) s += expectedDistinct(layerActivation(moe, l), tokens);
  return s / shape.nLayers;
}

/** Parses an expert-stats JSON text for `shape`; errors name the file and field. */
export function parseExpertStats(text: string, source: string, shape: ModelShape): number[][] {
  const fail = (msg: string): never => { throw new Error(`--expert-stats ${source}: ${msg}`); };
  if (!shape.moe) fail(`model '${shape.name}' has no experts (dense FFN); expert statistics apply to MoE models only`);
  const moe = shape.moe!;
  let raw: unknown;
  try { raw = JSON.parse(text); } catch (e) { return fail(`not JSON: ${(e as Error).message}`); }
  if (!raw || typeof raw !== 'object') fail('expected an object');
  const f = raw as Partial<ExpertStatsFile>;
  if (f.format !== EXPERT_STATS_FORMAT) fail(`format must be '${EXPERT_STATS_FORMAT}', got ${JSON.stringify(f.format)}`);
  if (f.version !== 1) fail(`version must be 1, got ${JSON.stringify(f.version)}`);
  if (f.nExpert !== moe.nExpert) fail(`nExpert ${String(f.nExpert)} does not match the model's ${moe.nExpert}`);
  if (f.nExpertUsed !== moe.nExpertUsed) fail(`nExpertUsed ${String(f.nExpertUsed)} does not match the model's ${moe.nExpertUsed}`);
  if (typeof f.tokens !== 'number' || !Number.isInteger(f.tokens) || f.tokens < 1) fail(`tokens must be a positive integer, got ${JSON.stringify(f.tokens)}`);
  const tokens = f.tokens!;
  if (!Array.isArray(f.layers) || f.layers.length !== shape.nLayers) fail(`layers must list all ${shape.nLayers} layers, got ${Array.isArray(f.layers) ? f.layers.length : typeof f.layers}`);
  const out: number[][] = new Array(shape.nLayers);
  f.layers!.forEach((entry, i) => {
    const where = `layers[${i}]`;
    if (!entry || typeof entry !== 'object') fail(`${where} must be an object {layer, counts}`);
    const l = entry.layer;
    if (!Number.isInteger(l) || l < 0 || l >= shape.nLayers) fail(`${where}.layer must be an integer in [0, ${shape.nLayers - 1}], got ${JSON.stringify(l)}`);
    if (out[l] !== undefined) fail(`${where}: layer ${l} listed twice`);
    if (!Array.isArray(entry.counts) || entry.counts.length !== moe.nExpert) fail(`${where}.counts must have ${moe.nExpert} entries, got ${Array.isArray(entry.counts) ? entry.counts.length : typeof entry.counts}`);
    let sum = 0;
    entry.counts.forEach((c, e) => {
      if (!Number.isInteger(c) || c < 0 || c > tokens) fail(`${where}.counts[${e}] must be an integer in [0, tokens = ${tokens}], got ${JSON.stringify(c)}`);
      sum += c;
    });
    // Each token picks exactly k experts; allow 1 % for runs that stopped mid-batch.
    const expected = moe.nExpertUsed * tokens;
    if (Math.abs(sum - expected) > 0.01 * expected) fail(`${where}: counts sum to ${sum}, expected nExpertUsed × tokens = ${expected}`);
    out[l] = entry.counts.map((c) => c / tokens);
  });
  return out;
}

/** The shape with measured routing probabilities from an expert-stats file. */
export function withExpertStats(shape: ModelShape, path: string): ModelShape {
  let text: string;
  try { text = readFileSync(path, 'utf8'); } catch (e) { throw new Error(`--expert-stats ${path}: ${(e as Error).message}`); }
  const activation = parseExpertStats(text, path, shape);
  return { ...shape, moe: { ...shape.moe!, activation, activationSource: path } };
}

/**
 * The routed experts of a GGUF model from llama.cpp's metadata keys ({arch}.expert_count,
 * .expert_used_count, .expert_feed_forward_length, .expert_shared_feed_forward_length) and the
 * formats of layer 0's ffn_{gate,up,down}_exps tensors. Unchanged for dense files (no
 * expert_count, or 0). Decision: the hyperparameter reader stays with the runtime's needs; the
 * planner adds what only it uses here.
 */
export function withGgufExperts(shape: ModelShape, file: GgufFile): ModelShape {
  const arch = metaOptionalString(file, 'general.architecture') ?? shape.family;
  const nExpert = metaOptionalInteger(file, `${arch}.expert_count`, 0, 4096) ?? 0;
  if (nExpert === 0) return shape;
  const nExpertUsed = metaInteger(file, `${arch}.expert_used_count`, 1, nExpert);
  const expertFf = metaOptionalInteger(file, `${arch}.expert_feed_forward_length`, 1, 1 << 22) ?? shape.nFf;
  const sharedFf = metaOptionalInteger(file, `${arch}.expert_shared_feed_forward_length`, 0, 1 << 22) ?? 0;
  const weightFormats = { ...shape.weightFormats };
  for (const [role, tensor] of [['ffn_gate', 'ffn_gate_exps'], ['ffn_up', 'ffn_up_exps'], ['ffn_down', 'ffn_down_exps']] as const) {
    const t = file.tensors.find((x) => x.name === `blk.0.${tensor}.weight`);
    if (t) weightFormats[role] = ggmlTypeName(t.type);
  }
  const out: ModelShape = { ...shape, nFf: expertFf, weightFormats, moe: { nExpert, nExpertUsed, sharedFf } };
  validateShape(out);
  return out;
}
