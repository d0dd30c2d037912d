// `fulcrum profile` argument handling, in a child process like a user's shell.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(__dirname, '..', '..');

function cli(...args: string[]) {
  return spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'engine', 'cli.ts'), 'profile', ...args], {
    cwd: root, encoding: 'utf8', timeout: 60_000,
  });
}

test('--help prints the options', () => {
  const r = cli('--help');
  assert.equal(r.status, 0);
  for (const o of ['--quick', '--json', '--out', '--no-cache', '--cached']) assert.ok(r.stdout.includes(o), o);
});

test('unknown options, stray arguments, contradictions and a missing --out directory are usage errors (exit 2) before measuring', () => {
  const cases: [string[], RegExp][] = [
    [['--bogus'], /unknown option --bogus/],
    [['extra'], /unexpected argument 'extra'/],
    [['--cached', '--no-cache'], /contradict/],
    [['--out', '/nonexistent-dir/fulcrum/p.json'], /--out .*does not exist/],
    [['--quick=yes'], /takes no value/],
  ];
  for (const [args, msg] of cases) {
    const r = cli(...args);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, msg);
  }
});
