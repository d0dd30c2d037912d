// Fill-in-the-middle against llama.cpp on the real tiny-fim-coder model (DeepSeek-Coder
// tokenizer and FIM tokens): for each prefix/suffix pair, Fulcrum's FIM prompt must equal the
// one node-llama-cpp builds (BOS, <｜fim▁begin｜> prefix <｜fim▁hole｜> suffix <｜fim▁end｜>, tokenized
// by llama.cpp), and its greedy middle must equal LlamaCompletion.generateInfillCompletion's,
// with prompt-lookup speculation off and on.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PromptBuilder } from '../../engine/completion/prompt';
import { runCompletion } from '../../engine/completion/runner';
import { Engine } from '../../engine/runtime/engine';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const CONTEXT = 512;
const MAX_TOKENS = 32;

const CASES: Array<{ prefix: string; suffix: string }> = [
  { prefix: 'def __init__(self', suffix: '\n        self.name = name\n' },
  { prefix: 'import os\n\ndef join_all(parts):\n    ', suffix: '\n    return result\n' },
  { prefix: 'class Queue:\n    def put(self, item):\n        ', suffix: '\n\n    def get(self):\n        return self.items.pop(0)\n' },
  { prefix: 'for i in range(', suffix: '):\n    print(i)\n' },
  { prefix: '', suffix: '\n    return x + 1\n' },
  { prefix: '    """Return the', suffix: '' },
];

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;
const dynamicImport = new Function('m', 'return import(m)') as (m: string) => Promise<Any>;

test('tiny-fim-coder: FIM prompts and greedy middles equal llama.cpp infill', { skip: skipUnlessShared(MODEL), timeout: 300_000 }, async (t) => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: CONTEXT });
  const nlc = await dynamicImport('node-llama-cpp');
  const llama = await nlc.getLlama({ gpu: false, build: 'never', logLevel: nlc.LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: MODEL });
  const context = await model.createContext({ contextSize: CONTEXT, batchSize: CONTEXT, threads: 1, flashAttention: false });
  const sequence = context.getSequence();
  const completion = new nlc.LlamaCompletion({ contextSequence: sequence });
  try {
    const builder = new PromptBuilder(engine.tokenizer);
    assert.equal(builder.fim?.family, 'deepseek-coder');
    assert.ok(completion.infillSupported, 'llama.cpp finds the FIM tokens too');
    const infill = model.tokens.infill;
    for (const { prefix, suffix } of CASES) {
      await t.test(JSON.stringify([prefix, suffix]), async () => {
        const prompt = builder.build(prefix, suffix);
        const refIds = [
          ...(model.tokens.shouldPrependBosToken ? [model.tokens.bos] : []),
          infill.prefix, ...model.tokenize(prefix, false, 'trimLeadingSpace'),
          infill.suffix, ...model.tokenize(suffix, false, 'trimLeadingSpace'),
          infill.middle,
        ];
        assert.deepEqual(prompt.ids, refIds, 'prompt ids');
        await sequence.clearHistory();
        const expected: string = await completion.generateInfillCompletion(prefix, suffix, {
          maxTokens: MAX_TOKENS, temperature: 0, repeatPenalty: false,
        });
        const plain = await runCompletion(engine, prompt.ids, { maxTokens: MAX_TOKENS, stopIds: prompt.stopIds });
        const fast = await runCompletion(engine, prompt.ids, { maxTokens: MAX_TOKENS, stopIds: prompt.stopIds, speculate: 8 });
        t.diagnostic(`${JSON.stringify(expected)} (${plain.generatedTokens} tokens, ${plain.stopReason}; speculative: ${fast.decodeSteps} steps, ${fast.acceptedDraftTokens}/${fast.draftedTokens} drafted tokens accepted)`);
        assert.equal(plain.text, expected, 'greedy middle');
        assert.equal(fast.text, expected, 'greedy middle with speculation');
        assert.deepEqual(fast.tokens, plain.tokens);
      });
    }
  } finally {
    completion.dispose?.();
    await context.dispose();
    await model.dispose();
    engine.dispose();
  }
});
