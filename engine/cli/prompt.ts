// `fulcrum prompt --model FILE --prefix TEXT --suffix TEXT [--json]`: prints the prompt a
// completion at the cursor between PREFIX and SUFFIX would feed the model, in the model's FIM
// format. Reads only the vocabulary, so a vocab-only GGUF works.
import { readGguf } from '../model/gguf';
import { createTokenizer } from '../model/tokenizer';
import { PromptBuilder } from '../completion/prompt';
import { readFileSync } from 'node:fs';
import { DEFAULT_PROMPT_BUDGET, fitContext } from '../completion/budget';
import { numberOption, parseArgs, UsageError, type CliCommand } from './command';

const USAGE = `usage: fulcrum prompt --model FILE (--prefix TEXT | --prefix-file F) [--suffix TEXT | --suffix-file F]
                      [--budget N] [--json]

Prints the token ids and text of the fill-in-the-middle prompt a completion at the cursor
between PREFIX and SUFFIX feeds the model: the document cut to the prompt budget the way the
editor cuts it (3:1 before and after the cursor, on line boundaries), in the format the model's
family was trained with (Qwen2.5-Coder, StarCoder, CodeLlama, DeepSeek-Coder, Codestral;
prefix-only for a model without FIM tokens).
  --budget N        tokens of document in the prompt (default ${DEFAULT_PROMPT_BUDGET}, the editor's
                    fulcrum.completions.promptBudget); 0: no budget, the whole text
  --prefix-file F   read the text before the cursor from F (a whole document, say)
  --json            {"ids": [...], "text": "...", "format": "...", "budget": N, "kept": {...}}
`;

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    const args = parseArgs(argv, ['model', 'prefix', 'suffix', 'prefix-file', 'suffix-file', 'budget'], ['json', 'help']);
    if (args.options.has('help')) { process.stdout.write(USAGE); return 0; }
    const modelPath = args.options.get('model');
    if (!modelPath) throw new UsageError(`prompt: --model FILE is required\n${USAGE}`);
    const text = (inline: string, file: string): string | undefined => {
      if (args.options.has(inline) && args.options.has(file)) throw new UsageError(`prompt: give --${inline} or --${file}, not both`);
      const f = args.options.get(file);
      return f !== undefined ? readFileSync(f, 'utf8') : args.options.get(inline);
    };
    const prefix = text('prefix', 'prefix-file');
    if (prefix === undefined) throw new UsageError(`prompt: --prefix TEXT or --prefix-file F is required (may be empty: --prefix '')\n${USAGE}`);
    const suffix = text('suffix', 'suffix-file') ?? '';
    const budget = Math.floor(numberOption(args, 'budget', DEFAULT_PROMPT_BUDGET, 0, 1 << 20));
    if (args.positionals.length > 0) throw new UsageError(`prompt: unexpected argument '${args.positionals[0]}'\n${USAGE}`);
    const builder = new PromptBuilder(createTokenizer(readGguf(modelPath)));
    // The editor's cut: what a completion at this cursor feeds the model (Completer.complete).
    const count = (t: string) => builder.encodePart(t, true).length;
    const fitted = budget > 0 ? fitContext(prefix, builder.fim ? suffix : '', budget, builder.overheadTokens, count) : { prefix, suffix: builder.fim ? suffix : '' };
    const prompt = builder.build(fitted.prefix, fitted.suffix);
    const kept = { prefixChars: fitted.prefix.length, ofPrefixChars: prefix.length, suffixChars: fitted.suffix.length, ofSuffixChars: suffix.length };
    if (args.options.has('json')) {
      process.stdout.write(`${JSON.stringify({ ids: prompt.ids, text: prompt.text, format: prompt.format, budget, kept })}\n`);
    } else {
      process.stdout.write(`format: ${prompt.format}\ntokens: ${prompt.ids.length} (budget ${budget || 'none'}; kept ${kept.prefixChars} of ${kept.ofPrefixChars} characters before the cursor, ${kept.suffixChars} of ${kept.ofSuffixChars} after)\nids: ${prompt.ids.join(' ')}\ntext: ${JSON.stringify(prompt.text)}\n`);
    }
    if (prompt.format === 'prefix-only') process.stderr.write('prompt: the model has no FIM tokens; the prompt is the prefix only\n');
    return 0;
  },
};
