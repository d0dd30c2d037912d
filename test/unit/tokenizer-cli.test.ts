// `fulcrum tokenize` run as a subprocess, as a user runs it: TEXT and --stdin (empty,
// whitespace-only and trailing-newline input read verbatim), --no-bos, --special, --json, errors.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { readGguf } from '../../engine/model/gguf';
import { createTokenizer } from '../../engine/model/tokenizer';

const ROOT = resolve(__dirname, '../..');
const VOCAB_DIR = resolve(ROOT, '../shared/vocab');
const SPM = join(VOCAB_DIR, 'ggml-vocab-llama-spm.gguf');
const STARCODER = join(VOCAB_DIR, 'ggml-vocab-starcoder.gguf');

function fulcrum(args: string[], input?: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'engine/cli.ts', 'tokenize', ...args], {
    cwd: ROOT,
    input: input ?? '',
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('fulcrum tokenize', { skip: existsSync(VOCAB_DIR) ? false : `${VOCAB_DIR} is absent` }, () => {
  const spm = existsSync(SPM) ? createTokenizer(readGguf(SPM)) : undefined;

  test('TEXT argument: ids space-separated, BOS per metadata; --no-bos; --json', () => {
    assert.deepEqual(fulcrum(['--model', SPM, 'Hello world']), { code: 0, stdout: '1 15043 3186\n', stderr: '' });
    assert.equal(fulcrum(['--model', SPM, '--no-bos', 'Hello world']).stdout, '15043 3186\n');
    const json = fulcrum(['--model', SPM, '--json', '--no-bos', 'Hello world']);
    assert.equal(json.code, 0);
    assert.deepEqual(JSON.parse(json.stdout), { ids: [15043, 3186] });
  });

  test('--stdin reads the text verbatim: empty, whitespace-only, trailing newline', () => {
    for (const input of ['', ' ', '  \n\t', '\n', 'Hello\n', 'def f():\n    return 1\n\n']) {
      const r = fulcrum(['--model', SPM, '--stdin', '--json'], input);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), { ids: spm!.encode(input) }, JSON.stringify(input));
    }
    assert.deepEqual(fulcrum(['--model', SPM, '--stdin'], ''), { code: 0, stdout: '1\n', stderr: '' });
    assert.deepEqual(fulcrum(['--model', SPM, '--stdin', '--no-bos'], ''), { code: 0, stdout: '\n', stderr: '' });
    // Three spaces plus the SentencePiece prefix space: one '▁▁▁▁' token (llama.cpp's test vector).
    assert.equal(fulcrum(['--model', SPM, '--stdin', '--no-bos'], '   ').stdout, '268\n');
  });

  test('special-token text is parsed only with --special', () => {
    assert.equal(fulcrum(['--model', STARCODER, '--special', '<fim_prefix>x']).stdout, '1 125\n');
    const plain = fulcrum(['--model', STARCODER, '<fim_prefix>x']).stdout.trim().split(' ').map(Number);
    assert.ok(!plain.includes(1), `plain text gave the control token: ${plain.join(' ')}`);
    assert.ok(plain.length > 2);
  });

  test('usage errors and unreadable models fail with a message', () => {
    const noModel = fulcrum(['Hello']);
    assert.notEqual(noModel.code, 0);
    assert.match(noModel.stderr, /--model FILE is required/);
    const both = fulcrum(['--model', SPM, '--stdin', 'Hello']);
    assert.notEqual(both.code, 0);
    assert.match(both.stderr, /TEXT or --stdin, not both/);
    const none = fulcrum(['--model', SPM]);
    assert.notEqual(none.code, 0);
    assert.match(none.stderr, /exactly one TEXT/);
    const missing = fulcrum(['--model', join(VOCAB_DIR, 'no-such.gguf'), 'x']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /no-such\.gguf/);
    const notTokenizer = fulcrum(['--model', join(VOCAB_DIR, 'README.md'), 'x']);
    assert.notEqual(notTokenizer.code, 0);
    assert.match(notTokenizer.stderr, /README\.md/);
  });
});
