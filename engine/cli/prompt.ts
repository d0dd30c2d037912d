// `fulcrum prompt --model FILE --prefix TEXT --suffix TEXT [--json]`: prints the prompt a
// completion at the cursor between PREFIX and SUFFIX would feed the model, in the model's FIM
// format. Reads only the vocabulary, so a vocab-only GGUF works.
import { readGguf } from '../model/gguf';
import { createTokenizer } from '../model/tokenizer';
import { PromptBuilder } from '../runtime/completion/prompt';
import { parseArgs, UsageError, type CliCommand } from './command';

const USAGE = `usage: fulcrum prompt --model FILE --prefix TEXT [--suffix TEXT] [--json]

Prints the token ids and text of the fill-in-the-middle prompt for the cursor between PREFIX
and SUFFIX, in the format the model's family was trained with (Qwen2.5-Coder, StarCoder,
CodeLlama, DeepSeek-Coder, Codestral; prefix-only for a model without FIM tokens).
  --json   {"ids": [...], "text": "...", "format": "..."}
`;

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    const args = parseArgs(argv, ['model', 'prefix', 'suffix'], ['json', 'help']);
    if (args.options.has('help')) { process.stdout.write(USAGE); return 0; }
    const modelPath = args.options.get('model');
    if (!modelPath) throw new UsageError(`prompt: --model FILE is required\n${USAGE}`);
    const prefix = args.options.get('prefix');
    if (prefix === undefined) throw new UsageError(`prompt: --prefix TEXT is required (may be empty: --prefix '')\n${USAGE}`);
    if (args.positionals.length > 0) throw new UsageError(`prompt: unexpected argument '${args.positionals[0]}'\n${USAGE}`);
    const builder = new PromptBuilder(createTokenizer(readGguf(modelPath)));
    const prompt = builder.build(prefix, args.options.get('suffix') ?? '');
    if (args.options.has('json')) {
      process.stdout.write(`${JSON.stringify({ ids: prompt.ids, text: prompt.text, format: prompt.format })}\n`);
    } else {
      process.stdout.write(`format: ${prompt.format}\nids: ${prompt.ids.join(' ')}\ntext: ${JSON.stringify(prompt.text)}\n`);
    }
    if (prompt.format === 'prefix-only') process.stderr.write('prompt: the model has no FIM tokens; the prompt is the prefix only\n');
    return 0;
  },
};
