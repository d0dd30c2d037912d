// Inline completions through a remote endpoint (ServerOptions.remote): the remote server does
// the work; a failed or slow endpoint returns undefined with the reason, and the caller falls
// back to the local model when one is loaded (and says so in the log).
import type { CompletionStats } from '../protocol';
import type { ServerContext } from '../context';
import { RemoteCompletionClient, type RemoteEndpointConfig } from '../../completion/remote/client';
import { fitContext } from '../../completion/budget';

let cached: { key: string; client: RemoteCompletionClient } | undefined;

function clientFor(config: RemoteEndpointConfig, timeoutMs: number): RemoteCompletionClient {
  const key = JSON.stringify([config, timeoutMs]);
  if (cached?.key !== key) cached = { key, client: new RemoteCompletionClient({ ...config, timeoutMs }) };
  return cached.client;
}

export type RemoteOutcome = { ok: true; text: string; stats: CompletionStats; where: string } | { ok: false; reason: string; cancelled: boolean; where: string };

/**
 * Decision: without a local model there is no tokenizer to count with, so a token is taken as 2.5
 * characters — on the low side on purpose: code in today's code-model vocabularies runs 3–4
 * characters a token, but digits are often one token each (DeepSeek-Coder's vocabulary turns
 * numbered Python at 3.5 characters a token into 1.9× the budget), and a prompt under the budget
 * costs less than one over it. With a local model loaded, its tokenizer counts.
 */
const CHARS_PER_TOKEN = 2.5;
/** FIM tokens and BOS a remote prompt adds around the prefix and suffix. */
const REMOTE_OVERHEAD_TOKENS = 4;

/** Decision: the remote time limit is the completion time limit when set, else 5 s. */
export async function completeRemotely(ctx: ServerContext, before: string, after: string, signal: AbortSignal): Promise<RemoteOutcome> {
  const config = ctx.options.remote!;
  const client = clientFor(config, ctx.options.completionTimeLimitMs > 0 ? ctx.options.completionTimeLimitMs : 5000);
  // The same prompt budget as a local completion: the text around the cursor cut 3:1 on line
  // boundaries (engine/completion/budget.ts), so a large file is not sent whole.
  const tokenizer = ctx.host.servingEngine()?.tokenizer;
  const count = tokenizer ? (t: string) => tokenizer.encode(t, { addBos: false }).length : (t: string) => Math.ceil(t.length / CHARS_PER_TOKEN);
  const fitted = fitContext(before, after, ctx.options.promptBudget, REMOTE_OVERHEAD_TOKENS, count);
  try {
    const r = await client.complete({ prefix: fitted.prefix, suffix: fitted.suffix, maxTokens: ctx.options.maxCompletionTokens, signal });
    const t = r.timings;
    const stats: CompletionStats = {
      promptTokens: t?.promptTokens ?? 0, generatedTokens: t?.generatedTokens ?? 0, promptMs: t?.promptMs ?? 0, generateMs: t?.generateMs ?? 0,
      tokensPerSecond: t && t.generateMs > 0 ? (t.generatedTokens * 1000) / t.generateMs : 0,
      stopReason: 'length', totalMs: r.ms, format: `remote ${client.describe()}`,
    };
    return { ok: true, text: r.text, stats, where: client.describe() };
  } catch (e) {
    return { ok: false, reason: (e as Error).message, cancelled: signal.aborted, where: client.describe() };
  }
}
