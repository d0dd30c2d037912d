// runsOnByLayer: the Model Layers panel's "Runs on" column, read from the placement that executes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runsOnByLayer, splitSummary } from '../../engine/runtime/lowering';
import type { NativeLayerPlacement, NativePlacement } from '../../engine/native/model';

const device = { loc: 'device' as const, weights: 'resident' as const };
const host = { loc: 'host' as const };

function layer(ops: NativeLayerPlacement['ops'], kv: 'host' | 'device' = 'device'): NativeLayerPlacement {
  return { ops, kv };
}

test('every op on the device from resident weights is GPU; none is CPU; anything between is GPU+CPU', () => {
  const p: NativePlacement = {
    head: host,
    layers: [
      layer({ AttnQkv: device, Attention: device, AttnOut: device, Ffn: device }),
      layer({ AttnQkv: device, Attention: host, AttnOut: device, Ffn: device }, 'host'),      // attention on the CPU (LIA, a Q8_0 KV cache)
      layer({ AttnQkv: { loc: 'device', weights: 'streamed' }, Attention: device, AttnOut: device, Ffn: device }), // weights copied in each step
      layer({ AttnQkv: device, Attention: device, AttnOut: device, Ffn: { loc: 'device', weights: 'resident', deviceFraction: 0.6 } }), // rows shared with the CPU
      layer({ AttnQkv: host, Attention: host, AttnOut: host, Ffn: host }, 'host'),
    ],
  };
  assert.deepEqual(runsOnByLayer(p, 5), { '-1': 'CPU', 0: 'GPU', 1: 'GPU+CPU', 2: 'GPU+CPU', 3: 'GPU+CPU', 4: 'CPU' });
  assert.match(splitSummary(p), /^GPU /, 'the same placement the status bar calls a GPU split');
});

test('no placement (the CPU runs the model, or the device failed) is CPU everywhere, the head too', () => {
  assert.deepEqual(runsOnByLayer(null, 3), { '-1': 'CPU', 0: 'CPU', 1: 'CPU', 2: 'CPU' });
});

test('the head on the device is GPU', () => {
  const p: NativePlacement = { head: device, layers: [layer({ AttnQkv: device, Attention: device, AttnOut: device, Ffn: device })] };
  assert.deepEqual(runsOnByLayer(p, 1), { '-1': 'GPU', 0: 'GPU' });
});
