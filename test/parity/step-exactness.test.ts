// A token's logits are the same bits whether it is evaluated alone (a decode step) or as one
// row of a multi-token step (speculative verification, a prompt chunk), at 1 and 2 threads and
// at contexts where decode attention used to split a row's positions between threads (merging
// per-thread partial softmaxes changed the sums' order: up to 6e-2 apart at 65-256 positions).
// This is what lets prompt-lookup speculation give exactly the plain greedy output. Every
// prefill tile kernel format (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K) at this CPU's ISA level, and the
// whole file again at AVX2 in a child process (FULCRUM_ISA=avx2), whose tiles differ.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { GgmlType } from '../../engine/model/ggml-types';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import type { NativeModel } from '../../engine/native/model';
import { Engine } from '../../engine/runtime/engine';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

async function check(label: string, file: string, vocab: number): Promise<void> {
  for (const threads of [1, 2]) {
    const engine = await Engine.load(file, { threads, contextLength: 512, device: 'cpu' });
    try {
      const m = (engine as unknown as { native: NativeModel }).native;
      for (const ctx of [31, 64, 65, 128, 200, 300]) {
        const prompt = Int32Array.from({ length: ctx }, (_, i) => 1 + ((i * 37 + 11) % (vocab - 2)));
        const next = Int32Array.from({ length: 6 }, (_, i) => 1 + ((i * 101 + 7) % (vocab - 2)));
        m.clearKv(0);
        m.eval(prompt, 0, false);
        const alone = Array.from(next, (t, i) => m.eval(Int32Array.of(t), ctx + i, false));
        m.clearKv(ctx);
        const all = m.eval(next, ctx, true);
        const n = all.length / next.length;
        for (let i = 0; i < next.length; i++) {
          assert.deepEqual(all.subarray(i * n, (i + 1) * n), alone[i], `${label}, ${threads} thread(s), context ${ctx}: row ${i} of the 6-token step differs from its decode step`);
        }
      }
    } finally {
      engine.dispose();
    }
  }
}

for (const [name, type] of [['Q8_0', GgmlType.Q8_0], ['Q4_0', GgmlType.Q4_0], ['Q5_0', GgmlType.Q5_0], ['Q4_K', GgmlType.Q4_K], ['Q6_K', GgmlType.Q6_K], ['F32', GgmlType.F32]] as const) {
  test(`a multi-token step's rows equal single-token steps bit for bit (synthetic llama ${name}, GQA)`, async () => {
    const { dir, cleanup } = tempDir();
    try {
      const file = path.join(dir, 'm.gguf');
      writeSyntheticModel(file, { architecture: 'llama', nLayers: 2, nEmbd: 256, nHeads: 8, nKvHeads: 2, nFf: 512, nVocab: 1024, contextLength: 512, seed: 5, weightType: type });
      await check(name, file, 1024);
    } finally {
      cleanup();
    }
  });
}

test('a multi-token step\'s rows equal single-token steps bit for bit (qwen2: biases, NeoX RoPE, one KV head)', async () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'q.gguf');
    writeSyntheticModel(file, { architecture: 'qwen2', nLayers: 2, nEmbd: 128, nHeads: 4, nKvHeads: 1, nFf: 256, nVocab: 512, contextLength: 512, seed: 9, weightType: GgmlType.Q8_0 });
    await check('qwen2 Q8_0', file, 512);
  } finally {
    cleanup();
  }
});

const FIM = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
test('a multi-token step\'s rows equal single-token steps bit for bit (tiny-fim-coder, a trained model)', { skip: skipUnlessShared(FIM) }, async () => {
  const e = await Engine.load(FIM, { threads: 1, contextLength: 512, device: 'cpu' });
  const vocab = e.hparams.nVocab;
  e.dispose();
  await check('tiny-fim-coder', FIM, Math.min(vocab, 30000));
});

test('the same at AVX2 (a child process with FULCRUM_ISA=avx2)', { skip: process.env.FULCRUM_ISA ? `already at ${process.env.FULCRUM_ISA}` : false, timeout: 600_000 }, () => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', fileURLToPath(import.meta.url)], {
    encoding: 'utf8', env: { ...process.env, FULCRUM_ISA: 'avx2', NODE_TEST_CONTEXT: undefined }, timeout: 600_000,
  });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`.slice(-3000));
  assert.match(r.stdout, /# pass 8\b/, `the child ran every check: ${r.stdout.slice(-500)}`);
});
