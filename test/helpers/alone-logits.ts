// The reference the multi-sequence step tests compare against (batch-execution, layer-steps,
// online-pipeline): each prompt evaluated alone as sequence 0 of the model from scratch, then
// `decodeSteps` greedy tokens, one step each: the prompt's logits and each decoded token's.
// And the small synthetic qwen2 (GQA, Q8_0) those tests also run on.
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { argmax } from '../../engine/runtime/sampler';
import type { NativeModel } from '../../engine/native/model';
import { tempDir } from './shared';

export function aloneLogits(native: NativeModel, prompts: readonly number[][], decodeSteps: number): Float32Array[][] {
  return prompts.map((p) => {
    native.clearKv(0, 0);
    const out = [native.eval(Int32Array.from(p), 0, false)];
    let pos = p.length;
    for (let i = 0; i < decodeSteps; i++) out.push(native.eval(Int32Array.of(argmax(out[out.length - 1]!)), pos++, false));
    return out;
  });
}

/** Runs `check` on a 3-layer synthetic qwen2 (4 heads, 2 KV heads, Q8_0, vocabulary 512) written to a temporary file. */
export async function withSyntheticQwen2(check: (file: string) => Promise<void>): Promise<void> {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'qwen2.gguf');
    writeSyntheticModel(file, { architecture: 'qwen2', nLayers: 3, nEmbd: 128, nHeads: 4, nKvHeads: 2, nFf: 256, nVocab: 512, contextLength: 128, seed: 3, weightType: GgmlType.Q8_0 });
    await check(file);
  } finally {
    cleanup();
  }
}
