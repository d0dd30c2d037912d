// `fulcrum generate --model FILE --prompt TEXT -n N …`: streams the continuation to stdout and
// ends with the prompt/generated token counts and decode speed on stderr.
import { writeFileSync } from 'node:fs';
import { parseBytes, simulateRequest } from '../plan/api';
import { Engine } from '../runtime/engine';
import { thisMachineProfile } from '../profile/profiler';
import { DEVICE_CHOICES, type DeviceChoice } from '../runtime/devices';
import { measuredChromeTrace } from '../runtime/trace';
import { executionLine, KV_FORMAT_USAGE, kvFormatOption, numberOption, parseArgs, UsageError, type CliCommand } from './command';

const USAGE = `usage: fulcrum generate --model FILE --prompt TEXT [-n N] [--temp T] [--top-k K] [--top-p P]
                        [--min-p P] [--repeat-penalty R] [--seed S] [--threads N] [--ctx N] [--stop TEXT]
                        [--device auto|cpu|vulkan|loopback] [--vram BYTES] [--policy NAME|auto] [--trace FILE]
                        [--link GBPS] [--device-threads N] [--kv-format f16|q8_0]

  -n, --n-predict N    tokens to generate (default 128)
  --temp T             temperature; 0 = greedy (default 0.8)
  --top-k K            keep the K most likely tokens (default 40; 0 = all)
  --top-p P            nucleus sampling (default 0.95)
  --min-p P            drop tokens below P × the top probability (default 0.05)
  --repeat-penalty R   penalise the last 64 tokens (default 1.0 = off)
  --seed S             PRNG seed (default random)
  --threads N          CPU threads (default: physical cores)
  --ctx N              context length (default min(training context, 4096))
  --stop TEXT          stop before this text (one string)
  --device D           auto (default: a GPU when found, else the CPU; the plan decides what runs
                       on it; never an emulated device unless asked), cpu, vulkan (a GPU through
                       Vulkan), or loopback (an emulated accelerator: exact, not fast)
  --vram BYTES         device memory the plan may use, e.g. 8G, 300M (vulkan: default the
                       driver's budget; loopback: its arena, default 1G)
  --policy NAME        the policy whose plan executes (default auto; see \`fulcrum plan --help\`)
  --trace FILE         write the measured per-op timeline (Chrome trace JSON, opens in Perfetto)
  --link GBPS          loopback link cap (default 0.4 × this machine's 1-thread copy bandwidth; 0 = none)
  --device-threads N   loopback kernel threads (default 1)
${KV_FORMAT_USAGE}`;

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    // -n is the one short option; map it to its long form before parsing.
    const args = parseArgs(
      argv.map((a) => (a === '-n' ? '--n-predict' : a)),
      ['model', 'prompt', 'n-predict', 'temp', 'top-k', 'top-p', 'min-p', 'repeat-penalty', 'seed', 'threads', 'ctx', 'stop', 'device', 'vram', 'policy', 'trace', 'link', 'device-threads', 'kv-format'],
      ['help'],
    );
    if (args.options.has('help')) {
      process.stdout.write(USAGE);
      return 0;
    }
    const model = args.options.get('model');
    const prompt = args.options.get('prompt');
    if (!model) throw new UsageError(`--model is required\n${USAGE}`);
    if (prompt === undefined) throw new UsageError(`--prompt is required\n${USAGE}`);
    const maxTokens = numberOption(args, 'n-predict', 128, 0, 1 << 20);
    const threads = args.options.has('threads') ? numberOption(args, 'threads', 1, 1, 512) : undefined;
    const ctx = args.options.has('ctx') ? numberOption(args, 'ctx', 1, 1, 1 << 22) : undefined;
    const device = (args.options.get('device') ?? 'auto') as DeviceChoice;
    if (!DEVICE_CHOICES.includes(device)) throw new UsageError(`--device must be one of ${DEVICE_CHOICES.join(', ')}, got '${device}'`);
    const vram = args.options.get('vram');
    const policy = args.options.get('policy');
    const tracePath = args.options.get('trace');
    const kvFormat = kvFormatOption(args);
    // Every option is checked before the model loads: a typo must not cost a load (or a profile).
    const sampling = {
      ...(args.options.has('temp') ? { temperature: numberOption(args, 'temp', 0.8, 0, 100) } : {}),
      ...(args.options.has('top-k') ? { topK: numberOption(args, 'top-k', 40, 0, 1 << 24) } : {}),
      ...(args.options.has('top-p') ? { topP: numberOption(args, 'top-p', 0.95, 0, 1) } : {}),
      ...(args.options.has('min-p') ? { minP: numberOption(args, 'min-p', 0.05, 0, 1) } : {}),
      ...(args.options.has('repeat-penalty') ? { repeatPenalty: numberOption(args, 'repeat-penalty', 1, 0.01, 100) } : {}),
      ...(args.options.has('seed') ? { seed: numberOption(args, 'seed', 0, 0, 2 ** 32 - 1) } : {}),
    };
    const linkGBps = args.options.has('link') ? numberOption(args, 'link', 0, 0, 1e4) : undefined;
    const deviceThreads = args.options.has('device-threads') ? Math.floor(numberOption(args, 'device-threads', 1, 1, 256)) : undefined;
    const vramBytes = vram !== undefined ? parseBytes(vram, '--vram') : undefined;
    const engine = await Engine.load(model, {
      hardware: thisMachineProfile,
      ...(threads !== undefined ? { threads: Math.floor(threads) } : {}),
      ...(ctx !== undefined ? { contextLength: Math.floor(ctx) } : {}),
      device,
      ...(kvFormat !== undefined ? { kvFormat } : {}),
      ...(vramBytes !== undefined ? { vramBytes } : {}),
      ...(policy !== undefined ? { policy } : {}),
      ...(linkGBps !== undefined ? { linkGBps } : {}),
      ...(deviceThreads !== undefined ? { deviceThreads } : {}),
      onFallback: (reason) => process.stderr.write(`fulcrum: the device failed, continuing on the CPU: ${reason}\n`),
      onReplan: (e) => process.stderr.write(`fulcrum: re-planned at ${e.atPosition} positions (${e.reason}): ${e.fromSplit} → ${e.toSplit}\n`),
    });
    const ex = engine.execution;
    process.stderr.write(`${executionLine(ex)}\n`);
    for (const n of ex.notes) process.stderr.write(`  note: ${n}\n`);
    if (tracePath) engine.setTracing(true);
    try {
      const ac = new AbortController();
      const onSigint = () => ac.abort();
      process.once('SIGINT', onSigint);
      const stop = args.options.get('stop');
      const result = await engine.generate(prompt, {
        maxTokens: Math.floor(maxTokens),
        ...sampling,
        ...(stop ? { stop: [stop] } : {}),
        signal: ac.signal,
        onText: (t) => process.stdout.write(t),
      });
      process.removeListener('SIGINT', onSigint);
      process.stdout.write('\n');
      process.stderr.write(
        `prompt tokens: ${result.promptTokens} (${result.promptMs.toFixed(1)} ms), generated tokens: ${result.generatedTokens}, ` +
          `${result.tokensPerSecond.toFixed(2)} tokens/s, threads: ${engine.threads}, stop: ${stopText(result.stopReason, engine.contextLength)}\n`,
      );
      const stats = engine.deviceStats();
      if (stats) process.stderr.write(`device memory: peak ${(stats.peakBytes / 2 ** 20).toFixed(2)} MiB of ${(stats.capacityBytes / 2 ** 20).toFixed(2)} MiB\n`);
      if (tracePath) {
        const t = engine.takeTrace();
        // The prompt runs in steps of at most 64 tokens (engine and device chunks), then one step per token.
        const steps = [...new Set(t.events.map((e) => e.step))].sort((a, b) => a - b);
        const prefillSteps = Math.ceil(result.promptTokens / 64);
        const json = measuredChromeTrace(t, (s) => `measured ${steps.indexOf(s) < prefillSteps ? 'prefill' : 'decode'} step ${steps.indexOf(s) + 1}`, { policy: ex.policy, split: ex.split, device: ex.device });
        // The simulator's decode step of the same plan first, so the two timelines sit side by side.
        if (ex.planParams && ex.plan) {
          const sim = simulateRequest({ ...ex.planParams, policy: ex.plan.chosenPolicy, trace: true }).trace!;
          const shift = 2;
          const simDecode = sim.traceEvents.filter((e) => e.pid === 2).map((e) => ({ ...e, pid: 1, ...(e.ph === 'M' && e.name === 'process_name' ? { args: { name: `simulated decode step (${ex.plan!.chosenPolicy})` } } : {}) }));
          json.traceEvents = [...simDecode, ...json.traceEvents.map((e) => ({ ...e, pid: e.pid + shift }))];
        }
        writeFileSync(tracePath, JSON.stringify(json));
        process.stderr.write(`trace: ${t.events.length} measured op events${ex.plan ? ' and the simulated decode step' : ''} written to ${tracePath}\n`);
      }
      return 0;
    } finally {
      engine.dispose();
    }
  },
};

/** Why generation ended, in words (the context's size where it filled up). */
export function stopText(reason: string, contextLength: number): string {
  if (reason === 'context') return `context full (${contextLength} positions; --ctx sets it)`;
  if (reason === 'length') return 'length (-n reached)';
  return reason;
}
