// `fulcrum serve --lsp --stdio`: the engine as a language server on stdin/stdout.
// `fulcrum serve --http --model FILE [--port N]`: the OpenAI-compatible HTTP API on 127.0.0.1.
import { randomBytes } from 'node:crypto';
import { ProposedFeatures, createConnection } from 'vscode-languageserver/node';
import { startServer } from '../server/server';
import { ServerFeedback } from '../server/feedback';
import { createHttpServer, modelAliasesOf } from '../server/http/server';
import { ChatFormatter } from '../server/http/chat';
import { parseBytes } from '../plan/api';
import { Engine } from '../runtime/engine';
import { iterationLine } from '../runtime/scheduler/online';
import { thisMachineProfile } from '../profile/profiler';
import { PromptBuilder } from '../completion/prompt';
import { DEVICE_CHOICES, type DeviceChoice } from '../runtime/devices';
import { kvFormatOption, KV_FORMAT_USAGE, numberOption, parseArgs, UsageError, type CliCommand, executionLine } from './command';

const USAGE = `usage: fulcrum serve --lsp --stdio
       fulcrum serve --http --model FILE [--port N] [--token T | --no-auth] [--parallel N]
                     [--ctx N] [--threads N] [--device D] [--vram BYTES] [--policy NAME] [--max-body BYTES] [--cors ORIGIN] [--cache-reuse]
                     [--log-iterations] [--kv-format f16|q8_0]

--lsp --stdio   the engine as a language server (LSP 3.18 inline completions plus fulcrum/*
                requests) on stdin/stdout; model and threads come from initializationOptions
                {modelPath, threads, device, vram, policy} or a fulcrum/loadModel request.
--http          OpenAI-compatible POST /v1/completions (stream: true for server-sent events),
                llama.cpp-compatible POST /infill (input_prefix, input_suffix, input_extra),
                GET /v1/models, GET /health and Prometheus GET /metrics on 127.0.0.1:PORT
                (default 8080; 0 picks a free port). Requests carry "Authorization: Bearer T";
                without --token a random token is printed at start; --no-auth disables it.
  --parallel N  requests decoded together, each with its own KV (default 4)
  --max-body B  largest request body (default 1M)
  --policy P    the plan executed on the device (auto, gpu-only, neo, apex, ...); with neo or apex
                their per-iteration decider runs live: each step it picks which requests attend on
                the CPU over host KV and which on the device, swaps KV between them and admits
                prompts. The log shows each change of mode (two-batch, gpu-only, async-overlap)
                with how many requests attended on the CPU
  --log-iterations  log every iteration's decision, not only changes of mode
${KV_FORMAT_USAGE}  --cache-reuse /infill requests with cache_prompt reuse the cached KV of text that moved (the
                suffix after a keystroke, the cursor's prompt after new input_extra) at shifted
                positions, keys re-rotated, as llama-server's --cache-reuse: fast, not bit-exact
  --cors O      let browser pages from origin O (or * for any) call the API: CORS headers and
                OPTIONS preflights (default off: no Access-Control-Allow-Origin)
                POST /v1/chat/completions renders the model's own chat template
                (tokenizer.chat_template; ChatML when the GGUF has none); a request's "model"
                may be the model's name or the file's base name (both listed by /v1/models)
`;

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    const args = parseArgs(argv, ['model', 'port', 'token', 'parallel', 'ctx', 'threads', 'device', 'vram', 'policy', 'max-body', 'cors', 'kv-format'], ['lsp', 'stdio', 'http', 'no-auth', 'help', 'cache-reuse', 'log-iterations']);
    if (args.options.has('help')) { process.stdout.write(USAGE); return 0; }
    if (args.positionals.length > 0) throw new UsageError(`serve: unexpected argument '${args.positionals[0]}'\n${USAGE}`);
    if (args.options.has('http')) return serveHttp(args);
    if (!args.options.has('lsp') || !args.options.has('stdio')) {
      throw new UsageError(`serve: give --lsp --stdio or --http\n${USAGE}`);
    }
    startServer(createConnection(ProposedFeatures.all, process.stdin, process.stdout));
    // The connection keeps the process alive; it exits on the client's `exit` notification.
    return new Promise<number>(() => undefined);
  },
};

async function serveHttp(args: ReturnType<typeof parseArgs>): Promise<number> {
  const model = args.options.get('model');
  if (!model) throw new UsageError(`serve --http: --model FILE is required\n${USAGE}`);
  if (args.options.has('token') && args.options.has('no-auth')) throw new UsageError('serve --http: --token and --no-auth exclude each other');
  const port = Math.floor(numberOption(args, 'port', 8080, 0, 65535));
  const parallel = Math.floor(numberOption(args, 'parallel', 4, 1, 256));
  const device = (args.options.get('device') ?? 'auto') as DeviceChoice;
  if (!DEVICE_CHOICES.includes(device)) throw new UsageError(`--device must be one of ${DEVICE_CHOICES.join(', ')}, got '${device}'`);
  const vram = args.options.get('vram');
  const policy = args.options.get('policy');
  const cors = args.options.get('cors');
  if (cors !== undefined && cors !== '*' && !cors.split(',').every((o) => /^https?:\/\/[^\s/]+$/.test(o.trim()))) {
    throw new UsageError(`--cors must be * or comma-separated origins such as http://localhost:3000, got '${cors}'`);
  }
  const maxBody = args.options.has('max-body') ? parseBytes(args.options.get('max-body')!, '--max-body') : 1 << 20;
  const token = args.options.has('no-auth') ? undefined : args.options.get('token') ?? randomBytes(18).toString('base64url');
  // Measured feedback: disagreements with the profile are logged here and re-measured in the background.
  const kvFormat = kvFormatOption(args);
  const feedback = new ServerFeedback({ onLog: (m) => process.stderr.write(`fulcrum: ${m}\n`) });
  const feedbackOptions = feedback.options();
  const engine = await Engine.load(model, {
      hardware: thisMachineProfile, ...(feedbackOptions ? { feedback: feedbackOptions } : {}),
    maxSequences: parallel, device, ...(kvFormat !== undefined ? { kvFormat } : {}),
    ...(args.options.has('threads') ? { threads: Math.floor(numberOption(args, 'threads', 1, 1, 512)) } : {}),
    ...(args.options.has('ctx') ? { contextLength: Math.floor(numberOption(args, 'ctx', 1, 1, 1 << 22)) } : {}),
    ...(vram !== undefined ? { vramBytes: parseBytes(vram, '--vram') } : {}),
    ...(policy !== undefined ? { policy } : {}),
    workload: { batch: parallel, prompt: 512, gen: 128 },
    onFallback: (reason) => process.stderr.write(`fulcrum: the device failed, continuing on the CPU: ${reason}\n`),
    onReplan: (e) => process.stderr.write(`fulcrum: re-planned at ${e.atPosition} positions (${e.reason}): ${e.fromSplit} → ${e.toSplit}\n`),
  });
  // NEO/APEX deciding live: each iteration's mode and where its requests attended, in the log.
  const everyIteration = args.options.has('log-iterations');
  let lastMode = '';
  const scheduler = engine.scheduler({
    online: {
      onIteration: (r) => {
        if (!everyIteration && r.mode === lastMode) return;
        lastMode = r.mode;
        process.stderr.write(`fulcrum: ${iterationLine(engine.execution.policy, r)}\n`);
      },
    },
  });
  if (scheduler.onlineDecider) process.stderr.write(`fulcrum: ${scheduler.onlineDecider.kind} decides every iteration live (which requests attend on the CPU over host KV, swaps, prompt admission)\n`);
  const chat = new ChatFormatter(engine.tokenizer, engine.chatTemplate);
  if (chat.source === 'chatml') process.stderr.write('fulcrum: the model has no chat template (tokenizer.chat_template); /v1/chat/completions uses ChatML\n');
  const { server } = createHttpServer({
    scheduler, modelId: engine.summary.name, modelAliases: modelAliasesOf(model), token, maxBodyBytes: maxBody,
    split: () => engine.execution.split, kvBytesInUse: () => engine.kvBytesInUse(),
    prompts: new PromptBuilder(engine.tokenizer), chat, contextLength: engine.contextLength, cacheReuse: args.options.has('cache-reuse'),
    ...(cors !== undefined ? { corsOrigin: cors } : {}),
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  process.stderr.write(`${executionLine(engine.execution)}\n`);
  process.stdout.write(`fulcrum: serving ${engine.summary.name} on http://127.0.0.1:${actual} (${parallel} parallel sequences, context ${engine.contextLength})\n`);
  process.stdout.write(token ? `fulcrum: token ${token}\n` : 'fulcrum: no authentication (--no-auth)\n');
  return new Promise<number>((resolve) => {
    const stop = () => {
      server.close();
      feedback.stop();
      void scheduler.close().finally(() => { engine.dispose(); resolve(0); });
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
