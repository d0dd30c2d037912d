// `fulcrum bench --model FILE [--threads N] [--prompt 512] [--gen 128] [--json]`: prefill and
// decode throughput of the CPU executor on one file.
import { benchModel } from '../runtime/bench';
import { numberOption, parseArgs, UsageError, type CliCommand } from './command';

const USAGE = `usage: fulcrum bench --model FILE [--threads N] [--prompt N] [--gen N] [--json]

  --threads N   CPU threads (default: physical cores)
  --prompt N    prompt tokens to prefill (default 512)
  --gen N       tokens to decode (default 128)
  --json        print one JSON object
`;

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    const args = parseArgs(argv, ['model', 'threads', 'prompt', 'gen'], ['json', 'help']);
    if (args.options.has('help')) {
      process.stdout.write(USAGE);
      return 0;
    }
    const model = args.options.get('model');
    if (!model) throw new UsageError(`--model is required\n${USAGE}`);
    const threads = args.options.has('threads') ? Math.floor(numberOption(args, 'threads', 1, 1, 512)) : undefined;
    const r = await benchModel(model, {
      ...(threads !== undefined ? { threads } : {}),
      promptTokens: Math.floor(numberOption(args, 'prompt', 512, 1, 1 << 20)),
      genTokens: Math.floor(numberOption(args, 'gen', 128, 0, 1 << 20)),
    });
    if (args.options.has('json')) {
      process.stdout.write(`${JSON.stringify({
        prompt_tokens_per_s: r.prompt_tokens_per_s,
        gen_tokens_per_s: r.gen_tokens_per_s,
        threads: r.threads,
        peak_rss_bytes: r.peak_rss_bytes,
      })}\n`);
    } else {
      process.stdout.write(
        `prefill: ${r.prompt_tokens} tokens in ${r.prompt_ms.toFixed(0)} ms = ${r.prompt_tokens_per_s.toFixed(1)} tokens/s\n` +
          `decode:  ${r.gen_tokens} tokens in ${r.gen_ms.toFixed(0)} ms = ${r.gen_tokens_per_s.toFixed(2)} tokens/s\n` +
          `threads: ${r.threads}, peak RSS: ${(r.peak_rss_bytes / 2 ** 20).toFixed(0)} MiB\n`,
      );
    }
    return 0;
  },
};
