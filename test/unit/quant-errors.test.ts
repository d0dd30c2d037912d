// Bad input to the quant exports throws a JS Error that names the type and the sizes; nothing
// crashes. And FULCRUM_ISA caps the ISA paths (checked in a child process).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { addonPath } from '../../engine/native/addon';

const built = existsSync(addonPath());
const skip = built ? false : `native addon not built (${addonPath()}); run node scripts/build-native.mjs`;

async function quant() {
  return import('../../engine/native/quant');
}

test('quantize: bad type ids and counts throw errors naming them', { skip }, async () => {
  const q = await quant();
  assert.throws(() => q.quantize(99, new Float32Array(32)), /unknown ggml type id 99/);
  assert.throws(() => q.quantize(-1, new Float32Array(32)), /unknown ggml type id/);
  assert.throws(() => q.quantize(2.5, new Float32Array(32)), /unknown ggml type id/);
  assert.throws(() => q.quantize(0, new Float32Array(32)), /type id 0 is not a block format/);
  assert.throws(() => q.quantize(12, new Float32Array(300)), /Q4_K \(block of 256 elements, 144 bytes\): 300 elements is not a multiple/);
  assert.throws(() => q.quantize(2, new Float32Array(33)), /Q4_0.*33 elements/);
  const bad = new Float32Array(32);
  bad[7] = NaN;
  assert.throws(() => q.quantize(8, bad), /src\[7\] is not finite/);
  bad[7] = Infinity;
  assert.throws(() => q.quantize(8, bad), /src\[7\] is not finite/);
  assert.throws(() => (q.quantize as (...a: unknown[]) => unknown)(8, [1, 2, 3]), /src must be a Float32Array/);
});

test('dequantize: wrong buffer sizes and counts throw errors naming them', { skip }, async () => {
  const q = await quant();
  assert.throws(() => q.dequantize(14, new Uint8Array(209), 256), /Q6_K \(block of 256 elements, 210 bytes\): 256 elements need 210 bytes, got 209/);
  assert.throws(() => q.dequantize(8, new Uint8Array(34), 64), /64 elements need 68 bytes, got 34/);
  assert.throws(() => q.dequantize(8, new Uint8Array(34), 31), /31 elements is not a multiple/);
  assert.throws(() => q.dequantize(8, new Uint8Array(34), -32), /n must be an integer in \[0, 2\^53\), got -32/);
  assert.throws(() => q.dequantize(8, new Uint8Array(34), 2 ** 60), /n must be an integer in \[0, 2\^53\)/);
  // a huge but valid count is refused by the size check before anything is allocated
  assert.throws(() => q.dequantize(8, new Uint8Array(34), 2 ** 40), /1099511627776 elements need 1168231104512 bytes, got 34/);
  assert.throws(() => (q.dequantize as (...a: unknown[]) => unknown)(8, new Float32Array(8), 32), /data must be a Uint8Array/);
  assert.equal(q.dequantize(8, new Uint8Array(0), 0).length, 0);
});

test('vecDot: mismatched sizes, activation-only formats and unknown ISAs throw', { skip }, async () => {
  const q = await quant();
  assert.throws(() => q.vecDot(2, new Uint8Array(18), new Float32Array(64)), /Q4_0 .*64 activations need a weight row of 36 bytes, got 18/);
  assert.throws(() => q.vecDot(12, new Uint8Array(144), new Float32Array(128)), /Q4_K .*128 elements is not a multiple/);
  assert.throws(() => q.vecDot(15, new Uint8Array(292), new Float32Array(256)), /Q8_K is an activation format/);
  assert.throws(() => q.vecDot(9, new Uint8Array(36), new Float32Array(32)), /Q8_1 is an activation format/);
  const act = new Float32Array(32);
  act[0] = NaN;
  assert.throws(() => q.vecDot(8, new Uint8Array(34), act), /activations\[0\] is not finite/);
  assert.throws(() => (q.vecDot as (...a: unknown[]) => unknown)(8, new Uint8Array(34), new Float32Array(32), 'neon'), /unknown isa 'neon'/);
  assert.equal(q.vecDot(8, new Uint8Array(0), new Float32Array(0)), 0);
});

test('FULCRUM_ISA=scalar caps the paths: only scalar runs, and asking for avx2 throws', { skip }, () => {
  const root = path.resolve(__dirname, '..', '..');
  const script = `
    const q = require('./engine/native/quant');
    const out = { isas: q.quantIsas() };
    try { q.vecDot(8, new Uint8Array(34), new Float32Array(32), 'avx2'); out.threw = false; }
    catch (e) { out.threw = String(e.message); }
    console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], {
    cwd: root, env: { ...process.env, FULCRUM_ISA: 'scalar' }, encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { isas: string[]; threw: string | false };
  assert.deepEqual(out.isas, ['scalar']);
  assert.match(String(out.threw), /isa avx2 cannot run on this CPU \(or FULCRUM_ISA caps it; level is scalar\)/);
});

test('dequantize and vecDot accept blocks at any byte offset (views into larger buffers)', { skip }, async () => {
  const q = await quant();
  const x = new Float32Array(512);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i) * 2;
  for (const typeId of [8, 12, 14, 15]) {
    const blocks = q.quantize(typeId, x);
    const backing = new Uint8Array(blocks.length + 3);
    backing.set(blocks, 3);
    const view = backing.subarray(3);  // odd byte offset
    assert.deepEqual(q.dequantize(typeId, view, x.length), q.dequantize(typeId, blocks, x.length), `type ${typeId}`);
    if (typeId !== 15) assert.equal(q.vecDot(typeId, view, x), q.vecDot(typeId, blocks, x), `type ${typeId}`);
  }
});

test('bench exports refuse absurd sizes and an unopened or missing peer with clear errors', { skip }, async () => {
  const q = await quant();
  assert.throws(() => q.benchMatVec(2, 4194304, 1048576, 'scalar', 1), /needs 2473901162496 bytes, more than the 4 GiB limit/);
  assert.throws(() => q.benchMatVec(0, 16, 256, 'scalar', 1), /type id 0 is not a weight block format/);
  assert.throws(() => q.benchMatVec(2, 16, 100, 'scalar', 1), /cols must be a multiple of 256/);
  assert.throws(() => q.quantPeer.open('/nonexistent/libggml-cpu.so'), /cannot load \/nonexistent\/libggml-cpu.so/);
  // a small real run returns a sane timing
  const t = q.benchMatVec(12, 32, 256, 'scalar', 1);
  assert.equal(t.bytes, 32 * 144);
  assert.ok(t.seconds > 0 && Number.isFinite(t.gbPerSecond));
});
