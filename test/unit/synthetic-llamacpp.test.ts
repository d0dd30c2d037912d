// An independent reader: llama.cpp (the prebuilt one node-llama-cpp ships) must load the
// synthetic models the writer produces, build a context, tokenize and evaluate a token.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { GgmlType } from '../../engine/model/ggml-types';
import { writeSyntheticModel, type SyntheticModelSpec } from '../../engine/model/synthetic';
import { sharedPath, tempDir } from '../helpers/shared';
import { existsSync } from 'node:fs';

type NodeLlamaCpp = typeof import('node-llama-cpp');

async function loadPeer(): Promise<NodeLlamaCpp | string> {
  try {
    return await import('node-llama-cpp');
  } catch (e) {
    return `node-llama-cpp cannot be loaded: ${(e as Error).message}`;
  }
}

test('llama.cpp loads and runs synthetic llama (Q8_0) and qwen2 (F16, tied, real vocab) models', { timeout: 60_000 }, async (t) => {
  const peer = await loadPeer();
  if (typeof peer === 'string') { t.skip(peer); return; }
  let llama;
  try {
    llama = await peer.getLlama({ gpu: false, build: 'never', logLevel: peer.LlamaLogLevel.error });
  } catch (e) {
    t.skip(`no prebuilt llama.cpp binary: ${(e as Error).message}`);
    return;
  }
  const { dir, cleanup } = tempDir();
  try {
    const vocab = sharedPath('vocab', 'ggml-vocab-llama-spm.gguf');
    const specs: Array<[string, SyntheticModelSpec]> = [
      ['llama-q8_0.gguf', { architecture: 'llama', nLayers: 2, nEmbd: 64, nHeads: 4, nKvHeads: 2, nFf: 128, nVocab: 400, contextLength: 256, weightType: GgmlType.Q8_0, seed: 1 }],
      ['qwen2-f16.gguf', {
        architecture: 'qwen2', nLayers: 1, nEmbd: 64, nHeads: 4, nKvHeads: 4, nFf: 96, contextLength: 256, weightType: GgmlType.F16, seed: 2, tiedOutput: true,
        ...(existsSync(vocab) ? { vocabFrom: vocab } : { nVocab: 500 }),
      }],
    ];
    for (const [name, spec] of specs) {
      const file = path.join(dir, name);
      writeSyntheticModel(file, spec);
      const model = await llama.loadModel({ modelPath: file });
      try {
        assert.equal(model.fileInfo.version, 3);
        const tokens = model.tokenize('hello world');
        assert.ok(tokens.length > 0, `${name}: tokenized`);
        const ctx = await model.createContext({ contextSize: 64 });
        try {
          const seq = ctx.getSequence();
          const it = seq.evaluate(tokens.slice(0, 1));
          const first = await it.next();
          assert.equal(first.done, false, `${name}: produced a token`);
          assert.ok(Number.isInteger(first.value) && (first.value as number) < (spec.nVocab ?? 32000));
        } finally {
          await ctx.dispose();
        }
      } finally {
        await model.dispose();
      }
    }
  } finally {
    cleanup();
    await llama.dispose();
  }
});
