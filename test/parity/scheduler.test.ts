// The scheduler's continuous batching: requests of different lengths arriving together and
// while others run share steps (four KV sequences, more requests than sequences so some queue),
// and each request's greedy text equals that prompt's text generated alone. Also: cancellation
// within a step frees the slot, a prompt over the context is refused with the numbers, the queue
// bound refuses, foreground requests are admitted before background ones, and KV is reused.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Engine } from '../../engine/runtime/engine';
import { SchedulerError } from '../../engine/runtime/scheduler/scheduler';
import { thisMachineProfile } from '../../engine/profile/profiler';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

const MODEL = sharedPath('models', 'stories260K.gguf');
const PROMPTS = ['Once upon a time', 'The cat', 'Lily and Ben went to the park. They saw a big', 'One day', 'Tom had a red ball', 'The sun was hot and', 'A little bird', 'Sara wanted to'];

async function alone(): Promise<string[]> {
  const e = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu' });
  try {
    const out: string[] = [];
    for (const p of PROMPTS) out.push((await e.generate(p, { maxTokens: 24, temperature: 0 })).text);
    return out;
  } finally {
    e.dispose();
  }
}

test('batched requests equal each alone, with more requests than sequences', { skip: skipUnlessShared(MODEL) }, async () => {
  const want = await alone();
  for (const device of ['cpu', 'loopback'] as const) {
    const e = await Engine.load(MODEL, { threads: 1, contextLength: 256, device, maxSequences: 4, ...(device === 'loopback' ? { vramBytes: 4 << 20, policy: 'gpu-only', hardware: thisMachineProfile } : {}) });
    try {
      const s = e.scheduler();
      // Half now, half after the first ones have started decoding.
      const first = PROMPTS.slice(0, 4).map((p) => s.submit({ prompt: p, maxTokens: 24, temperature: 0 }));
      await new Promise((r) => setTimeout(r, 5));
      const second = PROMPTS.slice(4).map((p) => s.submit({ prompt: p, maxTokens: 24, temperature: 0 }));
      const streams = [...first, ...second];
      const texts = await Promise.all(streams.map(async (st) => { let t = ''; for await (const piece of st) t += piece; return t; }));
      assert.deepEqual(texts, want, `${device}: streamed texts`);
      const results = await Promise.all(streams.map((st) => st.result));
      assert.deepEqual(results.map((r) => r.text), want);
      assert.ok(s.stats.stepRows / s.stats.steps > 1.5, `${device}: steps carried several rows (mean ${(s.stats.stepRows / s.stats.steps).toFixed(2)})`);
      assert.equal(s.stats.running, 0);
    } finally {
      e.dispose();
    }
  }
});

test('cancellation, refusals, priorities and KV reuse', { skip: skipUnlessShared(MODEL) }, async () => {
  const e = await Engine.load(MODEL, { threads: 1, contextLength: 64, device: 'cpu', maxSequences: 2 });
  try {
    const s = e.scheduler({ maxQueue: 3 });
    // Cancel mid-stream: the stream ends 'cancelled' and the slot is free again.
    const ac = new AbortController();
    const st = s.submit({ prompt: 'Once upon a time', maxTokens: 40, temperature: 0, signal: ac.signal });
    let pieces = 0;
    for await (const _ of st) { if (++pieces === 3) ac.abort(); }
    const r = await st.result;
    assert.equal(r.stopReason, 'cancelled');
    assert.ok(r.generatedTokens < 40);
    // Over the context: refused at once with the numbers.
    assert.throws(() => s.submit({ prompt: 'word '.repeat(100), maxTokens: 4 }), (err: unknown) => err instanceof SchedulerError && err.code === 'prompt_too_long' && /holds 64/.test(err.message));
    // Queue bound: 2 slots running + 3 queued; the sixth is refused.
    const long = Array.from({ length: 5 }, (_, i) => s.submit({ prompt: `The dog ${i}`, maxTokens: 30, temperature: 0, priority: i >= 3 ? 'foreground' : 'background' }));
    assert.throws(() => s.submit({ prompt: 'x', maxTokens: 1 }), (err: unknown) => err instanceof SchedulerError && err.code === 'queue_full');
    const done = await Promise.all(long.map((x) => x.result));
    // The two foreground requests queued last were admitted before the background one queued first.
    assert.ok(done[3]!.queuedMs <= done[2]!.queuedMs && done[4]!.queuedMs <= done[2]!.queuedMs, `queued ms ${done.map((d) => d.queuedMs.toFixed(1)).join(', ')}`);
    // KV reuse: the same prompt again reuses all but its last token.
    const a = await s.submit({ prompt: 'Once upon a time there was', maxTokens: 2, temperature: 0 }).result;
    const b = await s.submit({ prompt: 'Once upon a time there was', maxTokens: 2, temperature: 0 }).result;
    assert.equal(b.reusedTokens, b.promptTokens - 1, `reused ${b.reusedTokens} of ${b.promptTokens}`);
    assert.equal(a.text, b.text);
  } finally {
    e.dispose();
  }
});

test('speculating requests batched with others (mixed draft and prompt rows) equal each alone, plain greedy', { skip: skipUnlessShared(sharedPath('models', 'stories260K.gguf')) }, async () => {
  const { runCompletion } = await import('../../engine/completion/runner');
  const file = sharedPath('models', 'stories260K.gguf');
  // Repetitive prompts (drafts come from earlier occurrences) of different lengths, so one request
  // drafts while another is still in its prompt.
  const rep = (seed: number, n: number) => Array.from({ length: n }, (_, i) => 1 + ((i % 9) * 37 + seed * 11) % 500);
  const prompts = [rep(1, 40), rep(2, 150), rep(3, 90)];
  const alone: number[][] = [];
  for (const p of prompts) {
    const e = await Engine.load(file, { threads: 1, contextLength: 512, device: 'cpu' });
    try { alone.push((await runCompletion(e, p, { maxTokens: 24, stopIds: new Set(), speculate: 0 })).tokens); } finally { e.dispose(); }
  }
  const e = await Engine.load(file, { threads: 1, contextLength: 512, device: 'cpu', maxSequences: 3 });
  try {
    const got = await Promise.all(prompts.map((p) => runCompletion(e, p, { maxTokens: 24, stopIds: new Set(), speculate: 4 })));
    got.forEach((g, i) => assert.deepEqual(g.tokens, alone[i], `request ${i}`));
    assert.ok(got.some((g) => g.acceptedDraftTokens > 0), 'some drafts stood');
  } finally {
    e.dispose();
  }
});

test("the engine's own prefill (logits, generate) sizes its steps as the scheduler does: 64 rows until timed, then what fits; the same logits as 64-row steps", { skip: skipUnlessShared(MODEL) }, async () => {
  const prompt = Array.from({ length: 400 }, (_, i) => 1 + ((i * 7919) % 500));
  const e = await Engine.load(MODEL, { threads: 1, contextLength: 512, device: 'cpu' });
  let grown: Float32Array;
  try {
    grown = await e.logits(prompt);
    // 64 untimed rows, then whole 64-row multiples as the measured speed fits 200 ms (stories260K:
    // hundreds of rows; how many depends on the machine's moment), the last step the remainder.
    const steps = e.lastPromptSteps();
    assert.deepEqual(steps[0], { rows: 64, context: 0 });
    steps.forEach((s, i) => {
      assert.equal(s.context, i === 0 ? 0 : steps[i - 1]!.context + steps[i - 1]!.rows, JSON.stringify(steps));
      if (i < steps.length - 1) assert.equal(s.rows % 64, 0, JSON.stringify(steps));
    });
    assert.equal(steps.reduce((n, s) => n + s.rows, 0), prompt.length);
    assert.ok(steps.length < Math.ceil(prompt.length / 64), `stories260K's 400-token prompt in ${steps.length} steps: ${JSON.stringify(steps)}`);
  } finally {
    e.dispose();
  }
  // 64-row steps: the prompt reached 64 tokens at a time (each call evaluates only its new tokens).
  const small = await Engine.load(MODEL, { threads: 1, contextLength: 512, device: 'cpu' });
  try {
    let chunked = new Float32Array(0);
    for (let n = 64; n < prompt.length + 64; n += 64) {
      chunked = await small.logits(prompt.slice(0, Math.min(n, prompt.length)));
      assert.ok(small.lastPromptSteps().every((s) => s.rows <= 64), JSON.stringify(small.lastPromptSteps()));
    }
    assert.deepEqual(chunked, grown, 'the last logits of the prompt, bit for bit');
  } finally {
    small.dispose();
  }
});

test('a foreground prompt alone takes steps sized by its measured speed (same tokens as 64-row steps); a background one, or one sharing steps, keeps 64-row chunks', { skip: skipUnlessShared(MODEL) }, async () => {
  const prompt = Array.from({ length: 400 }, (_, i) => 1 + ((i * 7919) % 500));
  const run = async (soloPromptMs: number | undefined, priority: 'foreground' | 'background') => {
    const e = await Engine.load(MODEL, { threads: 1, contextLength: 512, device: 'cpu' });
    try {
      const s = e.scheduler(soloPromptMs === undefined ? {} : { soloPromptMs });
      const r = await s.submit({ prompt, maxTokens: 8, temperature: 0, priority }).result;
      // The prompt's steps: all but the 7 decode steps after the token the last prompt step decides.
      return { tokens: r.text, promptSteps: s.stats.steps - 7, stepRows: s.stats.stepRows };
    } finally {
      e.dispose();
    }
  };
  const chunked = await run(0, 'foreground');
  assert.equal(chunked.promptSteps, Math.ceil(prompt.length / 64), '64-row chunks with soloPromptMs 0');
  const solo = await run(undefined, 'foreground');
  // stories260K prefills far faster than 200 ms a step: the first (untimed) step is 64 rows,
  // the next take the rest up to the native batch of 512.
  assert.equal(solo.promptSteps, 2, `a 400-token prompt alone in ${solo.promptSteps} steps`);
  assert.equal(solo.tokens, chunked.tokens, 'the same text as with 64-row steps');
  assert.equal(solo.stepRows, chunked.stepRows);
  const background = await run(undefined, 'background');
  assert.equal(background.promptSteps, Math.ceil(prompt.length / 64), 'a background prompt keeps 64-row chunks');
  // Sharing the steps with a decoding request: 64-row chunks, whatever the budget.
  const e = await Engine.load(MODEL, { threads: 1, contextLength: 512, device: 'cpu', maxSequences: 2 });
  try {
    const s = e.scheduler();
    const decoding = s.submit({ prompt: 'Once upon a time', maxTokens: 200, temperature: 0, onlyStopIds: true, stopIds: new Set() });
    for await (const _ of decoding) break;
    const stepsBefore = s.stats.steps;
    const r = await s.submit({ prompt, maxTokens: 1, temperature: 0 }).result;
    const shared = s.stats.steps - stepsBefore;
    assert.ok(shared >= Math.ceil(prompt.length / 64), `the prompt beside a decoding request took ${shared} steps`);
    assert.equal(r.promptTokens, prompt.length);
    await decoding.result;
  } finally {
    e.dispose();
  }
});
