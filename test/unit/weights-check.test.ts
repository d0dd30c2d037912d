// Corrupted weights (issue 26 item 3): a model whose numbers are NaN/Inf must be reported with the
// damaged tensor, never "run" and print one repeated token. Fixtures are copies of the shared
// models with a few bytes overwritten, the way a damaged download looks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, openSync, writeSync, closeSync } from 'node:fs';
import path from 'node:path';
import { readGguf } from '../../engine/model/gguf';
import { findNonFiniteTensors } from '../../engine/model/gguf/check';
import { Engine } from '../../engine/runtime/engine';
import { assertFiniteLogits, NonFiniteLogitsError, Sampler } from '../../engine/runtime/sampler';
import { repoRoot, sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

const STORIES = sharedPath('models', 'stories260K.gguf');
const CODER = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');

/** Copies `src` into `dir` and writes `bytes` at `offset` bytes into tensor `name`'s data. */
function corrupt(src: string, dir: string, name: string, offsetInTensor: number, bytes: Buffer): string {
  const out = path.join(dir, `damaged-${path.basename(src)}`);
  copyFileSync(src, out);
  const t = readGguf(out).tensors.find((x) => x.name === name);
  assert.ok(t, `tensor ${name} in ${src}`);
  const fd = openSync(out, 'r+');
  try { writeSync(fd, bytes, 0, bytes.length, t.absOffset + offsetInTensor); } finally { closeSync(fd); }
  return out;
}

function f32(v: number): Buffer { const b = Buffer.alloc(4); b.writeFloatLE(v); return b; }

test('sampling non-finite logits fails with the position, for greedy and sampled decoding', () => {
  const logits = new Float32Array(16).fill(0.5);
  assert.doesNotThrow(() => assertFiniteLogits(logits, 3));
  logits[5] = Number.NaN;
  logits[9] = Number.POSITIVE_INFINITY;
  assert.throws(() => assertFiniteLogits(logits, 3), (e: Error) => e instanceof NonFiniteLogitsError && /2 non-finite logits of 16 \(first at token id 5\) at position 3/.test(e.message));
  for (const temperature of [0, 0.8]) {
    assert.throws(() => new Sampler({ temperature, seed: 1 }).sample(logits.slice(), [1, 2]), NonFiniteLogitsError);
  }
});

test('a float weight with NaN is refused at load, naming the tensor and its offset', { skip: skipUnlessShared(STORIES) }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = corrupt(STORIES, dir, 'blk.2.ffn_up.weight', 4 * 100, f32(Number.NaN));
    await assert.rejects(Engine.load(file, { threads: 1 }), (e: Error) => /non-finite/.test(e.message) && /tensor 'blk\.2\.ffn_up\.weight' \(F32\)/.test(e.message) && /element 100/.test(e.message));
    const found = findNonFiniteTensors(readGguf(file));
    assert.deepEqual(found.map((f) => [f.name, f.count, f.firstIndex]), [['blk.2.ffn_up.weight', 1, 100]]);
  } finally { cleanup(); }
});

test('a quantized block with an Inf scale: inspect --check names it, and generation stops with an error instead of repeating a token', { skip: skipUnlessShared(CODER) }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    // Q8_0 blocks are 34 bytes, the f16 scale first: 0x7c00 is +Inf. Block 7 of the Q projection.
    const file = corrupt(CODER, dir, 'blk.0.attn_q.weight', 34 * 7, Buffer.from([0x00, 0x7c]));
    const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'engine/cli.ts'), 'inspect', file, '--check'], { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stdout, /tensor 'blk\.0\.attn_q\.weight' \(Q8_0\) in .*: 1 non-finite block scale, the first at block 7/);
    const clean = spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'engine/cli.ts'), 'inspect', CODER, '--check'], { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 });
    assert.equal(clean.status, 0, clean.stderr);
    assert.match(clean.stdout, /every tensor's numbers are finite/);

    // Block scales are not read at load (that is the whole file): the logits catch it.
    const engine = await Engine.load(file, { threads: 1, maxSequences: 1 });
    try {
      await assert.rejects(engine.generate('def main(', { maxTokens: 8, temperature: 0 }), NonFiniteLogitsError);
      const stream = engine.scheduler().submit({ prompt: 'import os\n', maxTokens: 8, temperature: 0 });
      await assert.rejects(stream.result, NonFiniteLogitsError);
    } finally { engine.dispose(); }
  } finally { cleanup(); }
});
