// Layer-by-layer steps (APEX's asynchronous overlap, paper 004 §3.3: a CPU request advances one
// decoder layer per iteration inside the unified batch): host-KV sequences that run one layer of
// their token per step, beside sequences that run whole tokens in the same steps, give exactly
// the logits each sequence gets alone — on the CPU, and on the loopback device with the KV placed
// by sequence (APEX's placement: device-KV requests attend on the device, host-KV ones on the CPU).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../engine/runtime/engine';
import { argmax } from '../../engine/runtime/sampler';
import { nativePlanOps, type NativeLayerPlacement, type NativeModel, type NativeSeqInput } from '../../engine/native/model';
import { aloneLogits, withSyntheticQwen2 } from '../helpers/alone-logits';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

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
    const together = (): { out: Float32Array[][]; steps: number } => {
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
          const delay = LAYERED.get(s);
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
    const cpu = together();
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
    const loopback = together();
    for (let s = 0; s < SEQS; s++) assert.deepEqual(loopback.out[s], alone[s], `loopback, KV by sequence: sequence ${s} differs`);
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
