// `fulcrum infill --model FILE --prefix TEXT --suffix TEXT [-n N]`: greedy fill-in-the-middle
// completion; prints the middle to stdout and the prompt/generation counts to stderr.
import { DEFAULT_SPECULATE } from '../completion/completer';
import { Engine } from '../runtime/engine';
import { thisMachineProfile } from '../profile/profiler';
import { PromptBuilder } from '../completion/prompt';
import { runCompletion } from '../completion/runner';
import { KV_FORMAT_USAGE, kvFormatOption, numberOption, parseArgs, UsageError, type CliCommand } from './command';

const USAGE = `usage: fulcrum infill --model FILE --prefix TEXT [--suffix TEXT] [-n N] [--speculate K]
                      [--threads N] [--ctx N] [--kv-format f16|q8_0] [--json]

Greedy fill-in-the-middle: prints the text the model puts between PREFIX and SUFFIX (raw: no
completion rules applied), ending at the family's stop tokens or after N tokens.
  -n, --n-predict N   most tokens to generate (default 64)
  --speculate K       verify prompt-lookup drafts of up to K tokens per step (default 4; 0 = off;
                      the output is the same either way)
  --threads N         CPU threads (default: physical cores)
  --ctx N             context length (default min(training context, 4096))
${KV_FORMAT_USAGE}  --json              print {"text", "ids", "promptTokens", "format", ...} instead
`;

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    const args = parseArgs(argv.map((a) => (a === '-n' ? '--n-predict' : a)),
      ['model', 'prefix', 'suffix', 'n-predict', 'speculate', 'threads', 'ctx', 'kv-format'], ['json', 'help']);
    if (args.options.has('help')) { process.stdout.write(USAGE); return 0; }
    const modelPath = args.options.get('model');
    if (!modelPath) throw new UsageError(`infill: --model FILE is required\n${USAGE}`);
    const prefix = args.options.get('prefix');
    if (prefix === undefined) throw new UsageError(`infill: --prefix TEXT is required (may be empty: --prefix '')\n${USAGE}`);
    if (args.positionals.length > 0) throw new UsageError(`infill: unexpected argument '${args.positionals[0]}'\n${USAGE}`);
    const maxTokens = Math.floor(numberOption(args, 'n-predict', 64, 0, 1 << 20));
    const speculate = Math.floor(numberOption(args, 'speculate', DEFAULT_SPECULATE, 0, 64));
    const threads = args.options.has('threads') ? Math.floor(numberOption(args, 'threads', 1, 1, 512)) : undefined;
    const ctx = args.options.has('ctx') ? Math.floor(numberOption(args, 'ctx', 1, 1, 1 << 22)) : undefined;
    const kvFormat = kvFormatOption(args);
    const engine = await Engine.load(modelPath, {
      hardware: thisMachineProfile,
      ...(threads !== undefined ? { threads } : {}),
      ...(kvFormat !== undefined ? { kvFormat } : {}),
      ...(ctx !== undefined ? { contextLength: ctx } : {}),
    });
    try {
      const builder = new PromptBuilder(engine.tokenizer);
      if (builder.fim === undefined) process.stderr.write('infill: the model has no FIM tokens; completing the prefix only\n');
      const prompt = builder.build(prefix, args.options.get('suffix') ?? '');
      const result = await runCompletion(engine, prompt.ids, { maxTokens, stopIds: prompt.stopIds, speculate });
      if (args.options.has('json')) {
        process.stdout.write(`${JSON.stringify({
          text: result.text, ids: result.tokens, format: prompt.format, promptTokens: result.promptTokens,
          generatedTokens: result.generatedTokens, decodeSteps: result.decodeSteps, acceptedDraftTokens: result.acceptedDraftTokens,
          promptMs: result.promptMs, generateMs: result.generateMs, stopReason: result.stopReason,
        })}\n`);
      } else {
        process.stdout.write(`${result.text}\n`);
        const tps = result.generateMs > 0 ? (result.generatedTokens / result.generateMs) * 1000 : 0;
        process.stderr.write(`format: ${prompt.format}, prompt tokens: ${result.promptTokens} (${result.promptMs.toFixed(1)} ms), ` +
          `generated tokens: ${result.generatedTokens} in ${result.decodeSteps} steps, ${tps.toFixed(2)} tokens/s, stop: ${result.stopReason}\n`);
      }
      return 0;
    } finally {
      engine.dispose();
    }
  },
};
