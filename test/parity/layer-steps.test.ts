// Layer-by-layer steps (APEX's asynchronous overlap, paper 004 §3.3: a CPU request advances one
// decoder layer per iteration inside the unified batch): host-KV sequences that run one layer of
// their token per step, beside sequences that run whole tokens in the same steps, give exactly
// the logits each sequence gets alone — on the CPU, and on the loopback device with the KV placed
// by sequence (APEX's placement: device-KV requests attend on the device, host-KV ones on the CPU).
process.env.LP_NUM_THREADS = '1';
process.env.VK_INSTANCE_LAYERS = 'VK_LAYER_KHRONOS_validation';

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../engine/runtime/engine';
import { argmax } from '../../engine/runtime/sampler';
import { nativePlanOps, type NativeCompiledOp, type NativeLayerPlacement, type NativeModel, type NativeSeqInput } from '../../engine/native/model';
import { aloneLogits, withSyntheticQwen2 } from '../helpers/alone-logits';
import { sharedPath, skipUnlessShared } from '../helpers/shared';
import { existsSync } from 'node:fs';
import { vulkanProbe } from '../../engine/hardware/vulkan-profile';

const LAYER_JSON = ['/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json', '/usr/share/vulkan/explicit_layer.d/VkLayer_KHRONOS_validation.json'];
/** Why the Vulkan part is skipped (no device, no validation layer), or false. */
function vulkanSkip(): string | false {
  if (!LAYER_JSON.some(existsSync)) return 'the Khronos validation layer is not installed';
  const probe = vulkanProbe();
  return probe.available ? false : `no Vulkan device: ${probe.reason}`;
}

const SEQS = 4;
const DECODE_STEPS = 3;
/** Sequences 1 and 3 run layer by layer; 3 starts one step later, so the two are at different layers. */
const LAYERED = new Map([[1, 0], [3, 1]]);

async function check(file: string, vocab: number, nLayers: number): Promise<void> {
  const prompts = [3, 9, 17, 30].map((len, s) => Array.from({ length: len }, (_, i) => 1 + ((i * 31 + s * 7) % (vocab - 1))));
  const engine = await Engine.load(file, { threads: 1, contextLength: 128, device: 'cpu', maxSequences: SEQS });
  try {
    const native = (engine as unknown as { native: NativeModel }).native;
    const alone = aloneLogits(native, prompts, DECODE_STEPS);
    const together = (layered = LAYERED): { out: Float32Array[][]; steps: number } => {
      for (let s = 0; s < SEQS; s++) native.clearKv(0, s);
      const out: Float32Array[][] = prompts.map(() => []);
      native.evalBatch(prompts.map((p, s) => ({ seq: s, tokens: Int32Array.from(p), startPos: 0 }))).forEach((l, s) => out[s]!.push(l));
      const layer = prompts.map(() => 0);
      let steps = 0;
      for (;;) {
        const inputs: NativeSeqInput[] = [];
        prompts.forEach((p, s) => {
          const done = out[s]!.length - 1;
          if (done >= DECODE_STEPS) return;
          const input: NativeSeqInput = { seq: s, tokens: Int32Array.of(argmax(out[s]![done]!)), startPos: p.length + done };
          const delay = layered.get(s);
          if (delay !== undefined) {
            if (steps < delay) return;
            input.layer = layer[s]!;
          }
          inputs.push(input);
        });
        if (inputs.length === 0) break;
        const logits = native.evalBatch(inputs);
        steps++;
        inputs.forEach((input, k) => {
          if (input.layer === undefined || input.layer === nLayers - 1) {
            assert.equal(logits[k]!.length, vocab, `sequence ${input.seq}: logits once its token is done`);
            out[input.seq]!.push(logits[k]!);
            layer[input.seq] = 0;
          } else {
            assert.equal(logits[k]!.length, 0, `sequence ${input.seq}: no logits after layer ${input.layer}`);
            assert.equal(native.sequencePast(input.seq), input.startPos, 'a token not done leaves the sequence where it was');
            layer[input.seq]! += 1;
          }
        });
      }
      return { out, steps };
    };
    // APEX's window: every call of a layer-by-layer sequence that does not finish its token defers
    // its last layer's attention (host KV here) to the next call, which joins it.
    const deferredPerRun = LAYERED.size * DECODE_STEPS * (nLayers - 1);
    const deferred0 = native.deferredAttention.started;
    const cpu = together();
    assert.equal(native.deferredAttention.started - deferred0, deferredPerRun, 'CPU: attentions deferred to the next call');
    assert.ok(native.deferredAttention.runNs > 0);
    assert.ok(native.compiledOps().some((o) => o.kind === 'deferred_attention' && o.stage === 'layer-by-layer'), 'the window point is compiled');
    // Whole tokens of sequences 0 and 2 rode in the layer-by-layer steps: the batch ran
    // DECODE_STEPS · nLayers steps (plus one for the delayed sequence 3).
    assert.equal(cpu.steps, DECODE_STEPS * nLayers + 1);
    assert.deepEqual(cpu.out, alone, 'CPU: layer-by-layer steps differ from each sequence alone');
    assert.ok(native.compiledOps().some((o) => o.kind === 'layer_enter' && o.stage === 'layer-by-layer'), 'the layer-by-layer program ran');

    // APEX's placement on the loopback device: linear ops on the device, KV by sequence; the
    // layer-by-layer sequences keep their KV on the host (CPU requests), the others on the device.
    const ops: NativeLayerPlacement['ops'] = Object.fromEntries(nativePlanOps().map((o) => [o, { loc: 'device' }]));
    native.setPlacement({ layers: Array.from({ length: nLayers }, () => ({ ops, kv: 'host', kvBySequence: true })), head: { loc: 'device' } },
      { kind: 'loopback', capacityBytes: 32 << 20, threads: 1 });
    for (let s = 0; s < SEQS; s++) native.setSequenceKv(s, LAYERED.has(s) ? 'host' : 'device');
    const deferred1 = native.deferredAttention.started;
    const loopback = together();
    for (let s = 0; s < SEQS; s++) assert.deepEqual(loopback.out[s], alone[s], `loopback, KV by sequence: sequence ${s} differs`);
    // Between two device layers the edges move only their rows, on the copy lanes: X itself does
    // not go to the host and back at every layer.
    const layerOps = native.compiledOps().filter((o) => o.stage === 'layer-by-layer');
    for (const o of layerOps.filter((x) => x.layer >= 1 && x.layer < nLayers - 1 && (x.kind === 'layer_enter' || x.kind === 'layer_exit')))
      assert.deepEqual([o.lane, o.loc], [o.kind === 'layer_enter' ? 'h2d' : 'd2h', 'device'], `${o.kind} of layer ${o.layer} on the device's copy lane`);
    const interior = (o: NativeCompiledOp | undefined, kind: string): boolean => o?.kind === kind && o.layer >= 1 && o.layer < nLayers - 1;
    const edgeX = layerOps.filter((o, i) => o.kind === 'copy_rows' && (interior(layerOps[i + 1], 'layer_exit') || interior(layerOps[i - 1], 'layer_enter')));
    assert.deepEqual(edgeX, [], 'no whole-X copy around an edge between two device layers');
    assert.equal(native.deferredAttention.started - deferred1, deferredPerRun, 'loopback: the host-KV sequences deferred their attention');

    // A deferred attention in flight when its sequence's KV moves (re-planning swaps it to the
    // device): the move waits for it, and the next layer continues with its output, now over
    // device KV (no deferral there), with the logits of the sequence alone.
    if (nLayers >= 3) {
      for (let s = 0; s < SEQS; s++) native.clearKv(0, s);
      native.evalBatch([{ seq: 1, tokens: Int32Array.from(prompts[1]!), startPos: 0 }]);
      const next = { seq: 1, tokens: Int32Array.of(argmax(alone[1]![0]!)), startPos: prompts[1]!.length };
      const before = native.deferredAttention.started;
      assert.equal(native.evalBatch([{ ...next, layer: 0 }])[0]!.length, 0);
      assert.equal(native.deferredAttention.started, before + 1);
      native.swapSequenceKv(1, 'device');
      assert.equal(native.evalBatch([{ ...next, layer: 1 }])[0]!.length, 0);
      assert.equal(native.deferredAttention.started, before + 1, 'device KV: the attention runs within the step');
      assert.deepEqual(native.evalBatch([{ ...next, layer: 2, layers: nLayers - 2 }])[0], alone[1]![1], 'a swap during a deferred attention changed the token');
      native.swapSequenceKv(1, 'host');
      // A whole token at the position of a partly done one (deferred): the partial token is
      // dropped and the whole one is the sequence's own.
      native.clearKv(prompts[1]!.length, 1);
      assert.equal(native.evalBatch([{ ...next, layer: 0 }])[0]!.length, 0);
      assert.deepEqual(native.evalBatch([next])[0], alone[1]![1], 'a whole token after a deferred layer differs');
      assert.throws(() => native.evalBatch([{ ...next, startPos: next.startPos + 1, layer: 1 }]), /continues from layer 0 of that position, but the sequence holds no residual/);
      // clearKv while one is in flight: waited for, and the partly done token is gone.
      assert.equal(native.evalBatch([{ seq: 1, tokens: Int32Array.of(3), startPos: next.startPos + 1, layer: 0 }])[0]!.length, 0);
      native.clearKv(next.startPos + 1, 1);
      assert.throws(() => native.evalBatch([{ seq: 1, tokens: Int32Array.of(3), startPos: next.startPos + 1, layer: 1 }]), /holds no residual/);
    }
    // A whole prompt in a step with a layer-by-layer row: its last row's logits are its own (the
    // head reads each sequence's last row, moved where X is, on both sides).
    for (let s = 0; s < SEQS; s++) native.clearKv(0, s);
    native.evalBatch([{ seq: 1, tokens: Int32Array.from(prompts[1]!), startPos: 0 }]);
    const [prefilled, none] = native.evalBatch([
      { seq: 3, tokens: Int32Array.from(prompts[3]!), startPos: 0 },
      { seq: 1, tokens: Int32Array.of(argmax(alone[1]![0]!)), startPos: prompts[1]!.length, layer: 0 },
    ]);
    assert.deepEqual(prefilled, alone[3]![0], 'loopback: a prompt beside a layer-by-layer row differs from alone');
    assert.equal(none!.length, 0);

    // Vulkan (kernels of its own: X lives in device memory, the layer edges copy their rows on the
    // copy lanes, the window point copies X to the host and back): the layer-by-layer rows give
    // the bits of the same placement's whole tokens on the device (the shaders are not the CPU's
    // kernels: equal to each other, not to the CPU), with no validation message.
    const noVulkan = vulkanSkip();
    if (noVulkan) console.log(`  Vulkan part skipped: ${noVulkan}`);
    else {
      const onVulkan = (layered: Map<number, number>): Float32Array[][] => {
        native.setPlacement({ layers: Array.from({ length: nLayers }, () => ({ ops, kv: 'host', kvBySequence: true })), head: { loc: 'device' } },
          { kind: 'vulkan', capacityBytes: 64 << 20 });
        for (let s = 0; s < SEQS; s++) native.setSequenceKv(s, LAYERED.has(s) ? 'host' : 'device');
        assert.ok(native.layerSteps, 'Vulkan: the layer-by-layer program is compiled');
        return together(layered).out;
      };
      const whole = onVulkan(new Map());
      const started = native.deferredAttention.started;
      const layered = onVulkan(LAYERED);
      for (let s = 0; s < SEQS; s++) assert.deepEqual(layered[s], whole[s], `Vulkan: sequence ${s} differs from whole tokens on the device`);
      assert.equal(native.deferredAttention.started - started, deferredPerRun, 'Vulkan: the host-KV sequences deferred their attention');
      const p = vulkanProbe() as { validationMessages?: number; lastValidationMessage?: string };
      assert.equal(p.validationMessages, 0, `validation: ${p.lastValidationMessage}`);
    }
    native.setPlacement(null, null);

    // Out of order, or not one token at the sequence's end: a clear error, nothing changed.
    for (let s = 0; s < SEQS; s++) native.clearKv(0, s);
    native.evalBatch([{ seq: 0, tokens: Int32Array.from(prompts[0]!), startPos: 0 }]);
    const at = prompts[0]!.length;
    assert.throws(() => native.evalBatch([{ seq: 0, tokens: Int32Array.of(1), startPos: at, layer: 1 }]), /continues from layer 0 of that position, but the sequence holds no residual/);
    assert.throws(() => native.evalBatch([{ seq: 0, tokens: Int32Array.of(1), startPos: at, layer: nLayers }]), new RegExp(`the model has ${nLayers} layers`));
    assert.throws(() => native.evalBatch([{ seq: 0, tokens: Int32Array.of(1, 2), startPos: at, layer: 0 }]), /one token, got 2/);
    assert.throws(() => native.evalBatch([{ seq: 0, tokens: Int32Array.of(1), startPos: at - 1, layer: 0 }]), new RegExp(`must be the sequence's next \\(position ${at}\\)`));
    assert.equal(native.sequencePast(0), at);
  } finally {
    engine.dispose();
  }
}

test('sequences stepping one layer at a time beside whole tokens equal each alone (stories260K)', { skip: skipUnlessShared(sharedPath('models', 'stories260K.gguf')) }, async () => {
  await check(sharedPath('models', 'stories260K.gguf'), 512, 5);
});

test('sequences stepping one layer at a time beside whole tokens equal each alone (synthetic qwen2 Q8_0, GQA)', async () => {
  await withSyntheticQwen2((file) => check(file, 512, 3));
});
