// What a new user tripped over (issue 26 items 1, 2, 7, 8): each test types what the user typed
// and checks what comes back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SUPPORTED_ARCHITECTURES } from '../../engine/model/hparams';
import { hardwarePreset } from '../../engine/hardware/presets';
import { Engine } from '../../engine/runtime/engine';
import { listDevices } from '../../engine/runtime/devices';
import { repoRoot, sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

const STORIES = sharedPath('models', 'stories260K.gguf');
// A fixed host, so no test profiles this machine.
const HOST = hardwarePreset('ryzen9-7950x');

function cli(...args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'engine/cli.ts'), ...args], { cwd: repoRoot, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test('--link 0 is an uncapped loopback link, for every policy (item 1)', { skip: skipUnlessShared(STORIES) }, async () => {
  let onDevice = 0;
  for (const policy of ['gpu-only', 'layer-split', 'split-points', 'lia', 'kvpr', 'neo', 'apex']) {
    try {
      const e = await Engine.load(STORIES, { threads: 1, contextLength: 256, device: 'loopback', vramBytes: 2 << 20, policy, linkGBps: 0, hardware: HOST });
      try {
        const hw = e.execution.planParams?.hardware;
        const link = typeof hw === 'object' ? hw.link : undefined;
        assert.match(link?.name ?? '', /uncapped/, policy);
        assert.ok((link?.h2dPinnedGBps ?? 0) > 0, `${policy}: the plan's link has the machine's copy speed`);
        if (e.execution.device === 'loopback') onDevice++;
      } finally { e.dispose(); }
    } catch (err) {
      // A policy may not apply at this budget; it must never fail on the link.
      assert.doesNotMatch((err as Error).message, /link\.|h2dPinnedGBps/, policy);
    }
  }
  assert.ok(onDevice > 0, 'some policy executes on the uncapped loopback device');
});

test('--vram below the executor reserve: named, planned within what is left, and never placed then refused (item 2)', { skip: skipUnlessShared(STORIES) }, async () => {
  await assert.rejects(
    Engine.load(STORIES, { threads: 1, device: 'loopback', vramBytes: 300 << 10, policy: 'split-points', hardware: HOST }),
    /GPU needs .* of 0\.0 KiB left of the 300\.0 KiB budget after .* reserved for the executor's workspace \(activations, logits/,
  );
  const e = await Engine.load(STORIES, { threads: 1, device: 'loopback', vramBytes: 300 << 10, hardware: HOST });
  try {
    assert.equal(e.execution.device, 'cpu');
    assert.equal(e.execution.fallback, undefined, 'nothing was placed for the device to refuse');
    assert.ok(e.execution.notes.some((n) => /does not cover the .* the executor reserves on the device \(activations, logits/.test(n)), e.execution.notes.join('\n'));
    assert.match(e.execution.deviceReason, /keeps every op on the CPU: the device budget is used up by the executor's reserve/);
  } finally { e.dispose(); }
});

test('--vram above the memory behind the device is refused with both sizes (item 2)', { skip: skipUnlessShared(STORIES) }, async () => {
  await assert.rejects(
    Engine.load(STORIES, { threads: 1, device: 'loopback', vramBytes: os.totalmem() * 4, hardware: HOST }),
    /--vram .* is more than this machine's memory .* has \(.*\); give at most/,
  );
  const vulkan = listDevices().found.find((d) => d.name === 'vulkan');
  if (vulkan) {
    const r = cli('generate', '--model', STORIES, '--prompt', 'Once', '-n', '2', '--device', 'vulkan', '--vram', '1T');
    assert.equal(r.code, 1);
    assert.match(r.err, /--vram 1024\.00 GiB is more than the Vulkan device .* has/);
  }
});

test('the context: "context full" when it fills, a warning past the training length, the flag named (item 7)', { skip: skipUnlessShared(STORIES) }, () => {
  const full = cli('generate', '--model', STORIES, '--prompt', 'Once upon a time', '--ctx', '64', '-n', '1000000', '--temp', '0', '--device', 'cpu');
  assert.equal(full.code, 0, full.err);
  assert.match(full.err, /generated tokens: \d+, .*stop: context full \(64 positions; --ctx sets it\)/);
  const long = cli('generate', '--model', STORIES, '--prompt', 'Once', '--ctx', '4096', '-n', '2', '--device', 'cpu');
  assert.equal(long.code, 0, long.err);
  assert.match(long.err, /note: context 4096 is longer than the 2048 positions the model was trained with/);
  const tooLong = cli('generate', '--model', STORIES, '--prompt', 'Once upon a time there was a girl', '--ctx', '4', '-n', '2', '--device', 'cpu');
  assert.equal(tooLong.code, 1);
  assert.match(tooLong.err, /load with a larger context \(--ctx\)/);
});

test('options are checked before the model loads; a directory or a GPU alone gets a clear message (item 7)', { skip: skipUnlessShared(STORIES) }, () => {
  // A model path that does not exist: the bad option must be what is reported.
  for (const [flag, value] of [['--temp', 'hot'], ['--top-p', '2'], ['--seed', '-1'], ['--min-p', 'x']] as const) {
    const r = cli('generate', '--model', '/nonexistent/model.gguf', '--prompt', 'x', flag, value);
    assert.equal(r.code, 1);
    assert.match(r.err, new RegExp(`${flag} must be a number`), `${flag}: ${r.err}`);
  }
  const { dir, cleanup } = tempDir();
  try {
    const r = cli('generate', '--model', dir, '--prompt', 'x');
    assert.equal(r.code, 1);
    assert.match(r.err, new RegExp(`cannot read model ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: it is a directory`));
  } finally { cleanup(); }
  const gpu = cli('plan', '--model', 'llama-3.1-8b', '--hardware', 'rtx4090', '--workload', 'batch=1,prompt=512,gen=8');
  assert.equal(gpu.code, 1);
  assert.match(gpu.err, /'rtx4090' is a GPU, not a machine: use this\+rtx4090/);
});

test('the execution line nests no brackets and says when a policy leaves the device idle (item 7)', { skip: skipUnlessShared(STORIES) }, () => {
  const r = cli('generate', '--model', STORIES, '--prompt', 'Once', '-n', '2', '--device', 'cpu');
  assert.equal(r.code, 0, r.err);
  const line = r.err.split('\n').find((l) => l.startsWith('device: '))!;
  assert.match(line, /^device: cpu — asked for; policy: cpu-only; split: CPU only$/);
});

test('a split policy that placed nothing on the device is not printed as a split (item 7)', { skip: skipUnlessShared(STORIES) }, () => {
  const r = cli('generate', '--model', STORIES, '--prompt', 'Once', '-n', '2', '--device', 'loopback', '--vram', '1M');
  assert.equal(r.code, 0, r.err);
  const line = r.err.split('\n').find((l) => l.startsWith('device: '))!;
  assert.doesNotMatch(line, /policy: [a-z-]+; split: CPU only/);
  assert.match(line, /policy: [a-z-]+ placed nothing on the device; runs on the CPU only/);
});

test('fulcrum --version prints the package version (item 8)', () => {
  const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  for (const flag of ['--version', '-v']) {
    const r = cli(flag);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, new RegExp(`^fulcrum ${pkg.version.replace(/\./g, '\\.')}\\nnode v\\d+`));
  }
});

test('node bin/fulcrum.js, the direct form the README documents, prints only Fulcrum\'s lines (item 12)', { skip: existsSync(path.join(repoRoot, 'dist', 'cli.js')) ? false : 'dist/cli.js not built' }, () => {
  const r = spawnSync(process.execPath, [path.join(repoRoot, 'bin', 'fulcrum.js'), '--version'], { cwd: repoRoot, encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  assert.match(r.stdout.split('\n')[0]!, /^fulcrum \d+\.\d+\.\d+$/);
});

test('the README says each thing once, lists the architectures that run, and speaks of Vulkan, not CUDA (items 11, 12)', () => {
  const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  // Long prose lines and table rows that appear twice are copies that drift apart.
  const seen = new Map<string, number>();
  for (const line of readme.split('\n').map((l) => l.trim()).filter((l) => l.length > 60 && !l.startsWith('```'))) seen.set(line, (seen.get(line) ?? 0) + 1);
  assert.deepEqual([...seen].filter(([, n]) => n > 1).map(([l]) => l), []);
  const rows = readme.split('\n').filter((l) => /^\| `(unit|papers|parity|lsp|webview|e2e)` \|/.test(l)).map((l) => l.split('|')[1]!.trim());
  assert.deepEqual(rows, ['`unit`', '`papers`', '`parity`', '`lsp`', '`webview`', '`e2e`']);
  assert.equal(readme.split('\n').filter((l) => l.startsWith('`npm run package` builds')).length, 1);
  // Every architecture the runtime accepts is listed where the README says which run.
  const listed = readme.slice(readme.indexOf('**Architectures that run**'), readme.indexOf('**Architectures that run**') + 2000);
  for (const arch of SUPPORTED_ARCHITECTURES) assert.ok(listed.includes(`\`${arch}\``), `README lists ${arch} among the architectures that run`);
  assert.match(readme, /node bin\/fulcrum\.js/);
  const help = cli('profile', '--help');
  assert.doesNotMatch(help.out, /CUDA/);
  assert.match(help.out, /Vulkan/);
});
