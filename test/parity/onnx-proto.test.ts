// The ONNX writer behind the ONNX reference (test/helpers/onnx): protobuf wire bytes checked
// against hand-encoded values, and a small graph using every feature the decoder graph relies
// on (int/float/ints attributes, float and int64 initializers, a symbolic input dimension)
// parsed and run by onnxruntime-node, its result checked against the same computation in JS.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { attr, GraphBuilder } from '../helpers/onnx/graph-builder';
import { encodeTensor, OnnxDataType } from '../helpers/onnx/onnx-proto';
import { ProtoWriter } from '../helpers/onnx/protobuf';

type Ort = typeof import('onnxruntime-node');

let ortLoadError = '';
const ort: Ort | undefined = (() => {
  try {
    return require('onnxruntime-node') as Ort;
  } catch (e) {
    ortLoadError = `onnxruntime-node failed to load: ${(e as Error).message}`;
    return undefined;
  }
})();

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

test('protobuf writer: varints, negative int64, fixed32 floats, length-delimited fields', () => {
  assert.equal(hex(new ProtoWriter().int(1, 150).finish()), '089601');
  assert.equal(hex(new ProtoWriter().int(2, 0).finish()), '1000');
  // int64 -1: ten bytes of two's complement.
  assert.equal(hex(new ProtoWriter().int(1, -1).finish()), '08ffffffffffffffffff01');
  // 2^40: five empty 7-bit groups, then bit 40 as bit 5 of the sixth.
  assert.equal(hex(new ProtoWriter().int(1, 2 ** 40).finish()), '08808080808020');
  assert.equal(hex(new ProtoWriter().float(2, 1).finish()), '150000803f');
  assert.equal(hex(new ProtoWriter().string(1, 'ab').finish()), '0a026162');
  // Field 20 needs a two-byte tag.
  assert.equal(hex(new ProtoWriter().int(20, 7).finish()), 'a00107');
  // Large payloads are kept as separate chunks; the result must still be contiguous and exact.
  const big = new Uint8Array(10_000).map((_, i) => i & 0xff);
  const out = new ProtoWriter().int(1, 1).raw(9, big).int(1, 2).finish();
  assert.equal(out.length, 2 + 1 + 2 + big.length + 2);
  assert.deepEqual(out.subarray(5, 5 + big.length), big);
  assert.equal(hex(out.subarray(out.length - 2)), '0802');
});

test('TensorProto: dims, data_type, name, raw_data in field order', () => {
  const bytes = encodeTensor({ name: 'w', dataType: OnnxDataType.FLOAT, dims: [2], data: Float32Array.from([1, -2]) });
  assert.equal(hex(bytes), '0802' + '1001' + '420177' + '4a08' + '0000803f' + '000000c0');
  assert.throws(() => encodeTensor({ name: 'bad', dataType: OnnxDataType.FLOAT, dims: [3], data: new Float32Array(2) }), /'bad': 2 values for dims \[3\]/);
});

test('a graph from the builder runs in onnxruntime and computes what it describes', { skip: ort ? false : ortLoadError }, async () => {
  const o = ort!;
  const g = new GraphBuilder('writer-check');
  const x = g.input('x', OnnxDataType.FLOAT, ['batch', 3]);
  const idx = g.input('idx', OnnxDataType.INT64, [2]);
  const w = g.f32('w', [3, 2], [1, 2, 3, 4, 5, 6]);
  const y = g.op('LeakyRelu', [g.op('MatMul', [x, w])], { alpha: attr.float(0.25) }); // [batch, 2]
  const t = g.op('Transpose', [y], { perm: attr.ints([1, 0]) }); // [2, batch]
  const picked = g.op('Gather', [t, idx], { axis: attr.int(0) }); // rows idx of t
  const flat = g.op('Reshape', [picked, g.i64('shape', [-1])]);
  g.output(flat, 'out', OnnxDataType.FLOAT, ['n']);
  const session = await o.InferenceSession.create(g.toBytes());
  try {
    const xs = Float32Array.from([1, -1, 0.5, -2, 0, -1]); // batch 2
    const res = await session.run({ x: new o.Tensor('float32', xs, [2, 3]), idx: new o.Tensor('int64', BigInt64Array.from([1n, 0n]), [2]) });
    // y = leaky(x·w): row0 = [1-3+2.5, 2-4+3] = [0.5, 1]; row1 = [-2-5, -4-6] → ×0.25 = [-1.75, -2.5].
    // t = [[0.5, -1.75], [1, -2.5]]; rows [1, 0] → [1, -2.5, 0.5, -1.75].
    assert.deepEqual(Array.from(res.out!.data as Float32Array), [1, -2.5, 0.5, -1.75]);
  } finally {
    await session.release();
  }
});
