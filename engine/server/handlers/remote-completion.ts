// Inline completions through a remote endpoint (ServerOptions.remote): the remote server does
// the work; a failed or slow endpoint returns undefined with the reason, and the caller falls
// back to the local model when one is loaded (and says so in the log).
import type { CompletionStats } from '../protocol';
import type { ServerContext } from '../context';
import { RemoteCompletionClient, type RemoteEndpointConfig } from '../../runtime/completion/remote/client';

let cached: { key: string; client: RemoteCompletionClient } | undefined;

function clientFor(config: RemoteEndpointConfig, timeoutMs: number): RemoteCompletionClient {
  const key = JSON.stringify([config, timeoutMs]);
  if (cached?.key !== key) cached = { key, client: new RemoteCompletionClient({ ...config, timeoutMs }) };
  return cached.client;
}

export type RemoteOutcome = { ok: true; text: string; stats: CompletionStats; where: string } | { ok: false; reason: string; cancelled: boolean };

/** Decision: the remote time limit is the completion time limit when set, else 5 s. */
export async function completeRemotely(ctx: ServerContext, before: string, after: string, signal: AbortSignal): Promise<RemoteOutcome> {
  const config = ctx.options.remote!;
  const client = clientFor(config, ctx.options.completionTimeLimitMs > 0 ? ctx.options.completionTimeLimitMs : 5000);
  try {
    const r = await client.complete({ prefix: before, suffix: after, maxTokens: ctx.options.maxCompletionTokens, signal });
    const t = r.timings;
    const stats: CompletionStats = {
      promptTokens: t?.promptTokens ?? 0, generatedTokens: t?.generatedTokens ?? 0, promptMs: t?.promptMs ?? 0, generateMs: t?.generateMs ?? 0,
      tokensPerSecond: t && t.generateMs > 0 ? (t.generatedTokens * 1000) / t.generateMs : 0,
      stopReason: 'length', totalMs: r.ms, format: `remote ${client.describe()}`,
    };
    return { ok: true, text: r.text, stats, where: client.describe() };
  } catch (e) {
    return { ok: false, reason: (e as Error).message, cancelled: signal.aborted };
  }
}
