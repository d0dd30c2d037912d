// `fulcrum tokenize --model FILE [--no-bos] [--special] [--json] (TEXT | --stdin)`: prints the
// token ids the model's own tokenizer gives a text.
import { readGguf } from '../model/gguf';
import { createTokenizer } from '../model/tokenizer';
import { parseArgs, UsageError, type CliCommand } from './command';

const USAGE = `usage: fulcrum tokenize --model FILE [--no-bos] [--special] [--json] (TEXT | --stdin)

Prints the token ids of TEXT (or of everything read from stdin, verbatim) under the
tokenizer stored in the GGUF file, space-separated, or as {"ids": [...]} with --json.
  --no-bos    do not prepend BOS even where the model's metadata asks for it
  --special   turn special-token texts (e.g. <fim_prefix>) into their tokens
`;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    const args = parseArgs(argv, ['model'], ['no-bos', 'special', 'json', 'stdin', 'help']);
    if (args.options.has('help')) { process.stdout.write(USAGE); return 0; }
    const modelPath = args.options.get('model');
    if (!modelPath) throw new UsageError(`tokenize: --model FILE is required\n${USAGE}`);
    const fromStdin = args.options.has('stdin');
    if (fromStdin && args.positionals.length > 0) throw new UsageError(`tokenize: give TEXT or --stdin, not both\n${USAGE}`);
    if (!fromStdin && args.positionals.length !== 1) {
      throw new UsageError(`tokenize: expected exactly one TEXT argument (quote it), got ${args.positionals.length}\n${USAGE}`);
    }
    const tokenizer = createTokenizer(readGguf(modelPath));
    const text = fromStdin ? await readStdin() : args.positionals[0]!;
    const ids = tokenizer.encode(text, {
      addBos: args.options.has('no-bos') ? false : tokenizer.addBos,
      parseSpecial: args.options.has('special'),
    });
    process.stdout.write(args.options.has('json') ? `${JSON.stringify({ ids })}\n` : `${ids.join(' ')}\n`);
    return 0;
  },
};
