// `fulcrum inspect` run as a real subprocess: human and JSON output on stories260K, exit codes
// and messages on malformed and unsupported files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot, sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

function fulcrum(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'engine', 'cli.ts'), ...args], {
    cwd: repoRoot, encoding: 'utf8', timeout: 30_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const stories = sharedPath('models', 'stories260K.gguf');

test('inspect stories260K: tables for people', { skip: skipUnlessShared(stories) }, () => {
  const r = fulcrum('inspect', stories);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /model\s+llama \(llama\)/);
  assert.match(r.stdout, /heads\s+8 query, 4 key\/value, head dimension 8/);
  assert.match(r.stdout, /parameters\s+292,800/);
  assert.match(r.stdout, /tensor types\s+F32 × 48/);
  assert.match(r.stdout, /KV cache\s+640 B per token/);
  assert.match(r.stdout, /embedding & output .*256\.3 KiB/);
  assert.match(r.stdout, /layer 4\s+48\.0 KiB\s+129\.0 KiB\s+512 B\s+0 B\s+177\.5 KiB/);
});

test('inspect stories260K --json: summary, hparams and layers', { skip: skipUnlessShared(stories) }, () => {
  const r = fulcrum('inspect', stories, '--json');
  assert.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout) as { summary: { parameters: number; kvBytesPerToken: number }; hparams: { ropeStyle: string; nKvHeads: number }; layers: Array<{ index: number; totalBytes: number }> };
  assert.equal(j.summary.parameters, 292800);
  assert.equal(j.summary.kvBytesPerToken, 640);
  assert.equal(j.hparams.ropeStyle, 'normal');
  assert.equal(j.hparams.nKvHeads, 4);
  assert.deepEqual(j.layers.map((l) => l.index), [-1, 0, 1, 2, 3, 4]);
});

test('inspect a malformed file: the GgufFormatError message, exit 1', { skip: skipUnlessShared(stories) }, () => {
  const { dir, cleanup } = tempDir();
  try {
    const bad = path.join(dir, 'truncated.gguf');
    writeFileSync(bad, readFileSync(stories).subarray(0, 1185376 - 100)); // header intact, the last tensor cut short
    const r = fulcrum('inspect', bad);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.ok(r.stderr.includes(bad), r.stderr);
    assert.match(r.stderr, /invalid GGUF at byte \d+ \(tensor "[^"]+" offset\): data .* extends past the end of the file \(1185276 bytes\)/);
    const magic = path.join(dir, 'magic.gguf');
    writeFileSync(magic, Buffer.from('not a gguf file at all'));
    const m = fulcrum('inspect', magic);
    assert.equal(m.code, 1);
    assert.match(m.stderr, /invalid GGUF at byte 0 \(magic\)/);
  } finally {
    cleanup();
  }
});

const gpt2 = sharedPath('vocab', 'ggml-vocab-gpt-2.gguf');
test('inspect a valid GGUF of an unsupported architecture: header shown, reason, exit 1', { skip: skipUnlessShared(gpt2) }, () => {
  const r = fulcrum('inspect', gpt2);
  assert.equal(r.code, 1);
  assert.match(r.stdout, /GGUF v3, .* 0 tensors/);
  assert.match(r.stderr, /unsupported architecture 'gpt2'/);
});

test('inspect usage errors exit 2', () => {
  const r = fulcrum('inspect');
  assert.equal(r.code, 2);
  assert.match(r.stderr, /expected exactly one FILE/);
  assert.equal(fulcrum('inspect', 'x.gguf', '--bogus').code, 2);
});
