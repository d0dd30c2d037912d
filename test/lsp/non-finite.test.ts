// Issue 26 item 3 on the LSP surface: a model whose weights are damaged (an Inf block scale that
// the load check does not read) makes non-finite logits; the inline completion must fail with
// that error, never show ghost text of repeated '!'.
import assert from 'node:assert/strict';
import { closeSync, copyFileSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { readGguf } from '../../engine/model/gguf/reader';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';
import { LspSession, rejection } from './lsp-session';

const CODER = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const URI = 'file:///work/damaged.py';

test('LSP: a completion from a model with non-finite logits is an error, not ghost text', { skip: skipUnlessShared(CODER) }, async () => {
  const { dir, cleanup } = tempDir();
  const file = path.join(dir, 'damaged-coder.gguf');
  copyFileSync(CODER, file);
  const t = readGguf(file).tensors.find((x) => x.name === 'blk.0.attn_q.weight');
  assert.ok(t);
  // Q8_0 blocks are 34 bytes with the f16 scale first: 0x7c00 is +Inf (block 7).
  const fd = openSync(file, 'r+');
  try { writeSync(fd, Buffer.from([0x00, 0x7c]), 0, 2, t.absOffset + 34 * 7); } finally { closeSync(fd); }
  const lsp = LspSession.start();
  try {
    await lsp.initialize({ modelPath: file, threads: 1, completionTimeLimitMs: 0 });
    await lsp.waitFor(() => lsp.states.some((s) => s.state === 'ready'), 'state ready');
    lsp.openDocument(URI, 'import os\n\ndef main():\n    \n', 'python');
    const err = await rejection(lsp.inlineCompletion(URI, 3, 4));
    assert.match(err.message, /non-finite logits/);
  } finally {
    await lsp.stop();
    cleanup();
  }
});
