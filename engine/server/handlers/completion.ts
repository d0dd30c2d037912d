// textDocument/inlineCompletion (LSP 3.18): ghost text from the loaded model at the cursor, built
// by engine/completion (FIM prompt within the budget, KV reuse, rules, cache, caps).
import type { CancellationToken, InlineCompletionList, InlineCompletionParams } from 'vscode-languageserver';
import type { TextDocument } from 'vscode-languageserver-textdocument';
import { ChunkRing } from '../../completion/extra-context';
import type { ServerContext } from '../context';
import type { CursorCompletionStats, PromptCut } from '../../completion/completer';
import { FulcrumNotifications, type CompletionExtendedParams, type CompletionStats, type RemoteStatusParams } from '../protocol';
import { parseCompletionOptions } from '../completion-options';
import { completeRemotely } from './remote-completion';
import { invalidParams, requireInteger, requireObject, requireString } from '../validate';

const METHOD = 'textDocument/inlineCompletion';

interface ParsedRequest {
  document: TextDocument;
  /** Offset of the cursor in the document. */
  cursor: number;
  /** VS Code's selected suggest-widget item: the completion must start with its text. */
  selected?: { startOffset: number; text: string };
}

export function registerCompletionHandlers(ctx: ServerContext): void {
  // Where the user worked last in each document: extra context for completions in the others.
  const ring = new ChunkRing();
  ctx.documents.onDidClose((e) => ring.forget(e.document.uri));
  ctx.connection.languages.inlineCompletion.on(
    (params: InlineCompletionParams, token: CancellationToken) => complete(ctx, ring, params, token));
  // A document got focus: evaluate its prompt at the cursor before the first completion asks.
  ctx.connection.onNotification(FulcrumNotifications.warmCompletion, (raw: unknown) => {
    void warmUp(ctx, ring, raw).catch((err: unknown) => ctx.connection.console.error(`warm-up: ${err instanceof Error ? err.message : String(err)}`));
  });
  // New settings apply from the next completion on; a bad value is logged and ignored.
  ctx.connection.onNotification(FulcrumNotifications.completionOptions, (raw: unknown) => {
    const method = FulcrumNotifications.completionOptions;
    try {
      const changed = parseCompletionOptions(method, requireObject(method, raw), 'params');
      Object.assign(ctx.options, changed);
      // The log says which settings the next completion uses (a token is never written out).
      const shown = Object.entries(changed).map(([k, v]) => `${k} ${k === 'remote' ? (v as { url?: string } | undefined)?.url || 'off' : JSON.stringify(v)}`);
      ctx.connection.console.log(`completion settings: ${shown.join(', ')}`);
    } catch (err) {
      ctx.connection.console.error(err instanceof Error ? err.message : String(err));
    }
  });
}

/**
 * fulcrum/warmCompletion: the prompt a completion at the cursor would have (same budget, token
 * cap, extra context and mode), evaluated with nothing generated. Skipped when completions go to
 * an endpoint, without a local model, for a document the engine does not have open, and when a
 * completion or a newer warm-up arrives first.
 */
async function warmUp(ctx: ServerContext, ring: ChunkRing, raw: unknown): Promise<void> {
  const { options } = ctx;
  if (options.remote || ctx.host.servingEngine() === undefined) return;
  const method = FulcrumNotifications.warmCompletion;
  const params = requireObject(method, raw);
  const uri = requireString(method, requireObject(method, params.textDocument, 'params.textDocument'), 'uri', 'params.textDocument.uri');
  const document = ctx.documents.get(uri);
  if (!document) return;
  const cursor = offsetOf(document, params.position, 'params.position', method);
  const text = document.getText();
  const before = text.slice(0, cursor), after = text.slice(cursor);
  if (before.length === 0 && after.trim().length === 0) return;
  const extraContext = options.extraContext ? ring.chunksFor(uri) : undefined;
  const w = await ctx.host.warm((completer, signal) => completer.warm({
    document: uri, before, after,
    budget: options.promptBudget,
    maxTokens: options.maxCompletionTokens,
    exact: options.exactPrompt,
    ...(extraContext ? { extraContext } : {}),
    signal,
  }));
  if (w) ctx.connection.console.log(`warm-up: ${uri}, prompt ${w.promptTokens} tokens (${w.reusedTokens} reused, ${w.evaluatedTokens} evaluated in ${w.promptMs.toFixed(0)} ms), ${w.stopReason === 'cancelled' ? 'cut short by a completion' : 'done'}`);
}

async function complete(ctx: ServerContext, ring: ChunkRing, raw: unknown, token: CancellationToken): Promise<InlineCompletionList> {
  const request = parse(ctx, raw);
  const { document, cursor, selected } = request;
  const text = document.getText();
  const extraContext = ctx.options.extraContext ? ring.chunksFor(document.uri) : undefined;
  ring.note(document.uri, text, document.positionAt(cursor).line);
  // With a selected suggestion the model continues "prefix up to the word + suggested word".
  const before = selected ? text.slice(0, selected.startOffset) + selected.text : text.slice(0, cursor);
  const after = text.slice(cursor);

  // Nothing around the cursor: no request to the engine (an empty prompt conditions on nothing).
  if (before.length === 0 && after.trim().length === 0) return { items: [] };

  const abort = new AbortController();
  if (token.isCancellationRequested) abort.abort();
  const subscription = token.onCancellationRequested(() => abort.abort());
  try {
    const { options } = ctx;
    if (options.remote) {
      const r = await completeRemotely(ctx, before, after, abort.signal);
      if (r.ok) {
        void ctx.connection.sendNotification(FulcrumNotifications.remote, { endpoint: r.where, ok: true } satisfies RemoteStatusParams);
        void ctx.connection.sendNotification(FulcrumNotifications.stats, r.stats);
        ctx.connection.console.log(`completion: remote ${r.where}, ${r.text.length} characters in ${(r.stats.totalMs ?? 0).toFixed(0)} ms`);
        if (r.text.length === 0) return { items: [] };
        const start = document.positionAt(selected ? selected.startOffset : cursor);
        return { items: [{ insertText: (selected ? selected.text : '') + r.text, range: { start, end: document.positionAt(cursor) } }] };
      }
      if (r.cancelled) return { items: [] };
      const local = ctx.host.servingEngine() !== undefined;
      ctx.connection.console.warn(`completion: remote endpoint failed (${r.reason}); ${local ? 'completing with the local model' : 'no local model to fall back to'}`);
      void ctx.connection.sendNotification(FulcrumNotifications.remote, { endpoint: r.where, ok: false, reason: r.reason, fallback: local ? 'local' : 'none' } satisfies RemoteStatusParams);
      // Decision: no ghost text rather than a NoModel error per keystroke; the notification and the log say why.
      if (!local) return { items: [] };
    }
    const request = {
      document: document.uri,
      before,
      after,
      budget: options.promptBudget,
      maxTokens: options.maxCompletionTokens,
      timeLimitMs: options.completionTimeLimitMs > 0 ? options.completionTimeLimitMs : Infinity,
      // Shown early only when the full text can be served from the cache afterwards.
      showPartialAfterMs: options.completionCache ? options.showPartialAfterMs : 0,
      maxPromptMs: options.maxPromptMs,
      useCache: options.completionCache,
      exact: options.exactPrompt,
      ...(extraContext ? { extraContext } : {}),
    };
    const result = await ctx.host.complete((completer, signal) => completer.complete({ ...request, signal }), abort.signal);
    if (result.cut) {
      // The whole prompt is read when the engine is free (after this completion's decoding); the
      // next keystroke supersedes the warm-up, which keeps what it read and resumes after it.
      const { budget, wholePromptTokens, wholeCachedTokens, promptTokensPerSecond } = result.cut;
      ctx.connection.console.log(`completion: prompt cut to ${budget} of ${wholePromptTokens} tokens (${wholeCachedTokens} cached) to answer within maxPromptMs ${options.maxPromptMs} ` +
        `at ${promptTokensPerSecond.toFixed(0)} tok/s; the whole prompt is read in the background`);
      const { maxPromptMs: _cutLimit, showPartialAfterMs: _shown, ...whole } = request;
      void ctx.host.warm((completer, signal) => completer.warm({ ...whole, signal })).then((w) => {
        if (w && w.stopReason !== 'cancelled') ctx.connection.console.log(`completion: the whole prompt is read (${w.evaluatedTokens} tokens in ${w.promptMs.toFixed(0)} ms); the next completions use it`);
      }, (err: unknown) => ctx.connection.console.warn(`completion: reading the whole prompt in the background failed: ${err instanceof Error ? err.message : String(err)}`));
    }
    if (result.rest) {
      // Partial: the full completion's stats and log line come when it ends; the client is told
      // to ask again if it is longer (the cache then serves it at this cursor).
      const version = document.version, uri = document.uri, position = document.positionAt(cursor), partialLength = result.text.length;
      ctx.connection.console.log(`completion: partial after ${result.stats.totalMs.toFixed(0)} ms (${result.stats.generatedTokens} tokens, ${partialLength} characters shown), decoding goes on`);
      void result.rest.then((full) => {
        report(ctx, full.stats, full.cut);
        if (full.stats.stopReason === 'cancelled' || full.text.length <= partialLength || !full.text.startsWith(result.text)) return;
        void ctx.connection.sendNotification(FulcrumNotifications.completionExtended,
          { textDocument: { uri, version }, position, length: full.text.length, partialLength } satisfies CompletionExtendedParams);
      }, (err: unknown) => ctx.connection.console.error(`completion: decoding after the partial text failed: ${err instanceof Error ? err.message : String(err)}`));
    } else {
      report(ctx, result.stats, result.cut);
    }
    if (result.text.length === 0) return { items: [] };
    const start = document.positionAt(selected ? selected.startOffset : cursor);
    const end = document.positionAt(cursor);
    const insertText = (selected ? selected.text : '') + result.text;
    return { items: [{ insertText, range: { start, end } }] };
  } finally {
    subscription.dispose();
  }
}

/** The status bar's figures (fulcrum/stats) and the log line of a finished completion. */
function report(ctx: ServerContext, s: CursorCompletionStats, cut?: PromptCut): void {
  const stats: CompletionStats = {
    promptTokens: s.promptTokens,
    generatedTokens: s.generatedTokens,
    promptMs: s.promptMs,
    generateMs: s.generateMs,
    tokensPerSecond: s.tokensPerSecond,
    stopReason: s.stopReason,
    reusedTokens: s.reusedTokens,
    totalMs: s.totalMs,
    format: s.format,
    ...(cut ? { wholePromptTokens: cut.wholePromptTokens } : {}),
  };
  void ctx.connection.sendNotification(FulcrumNotifications.stats, stats);
  ctx.connection.console.log(`completion: ${s.format}, prompt ${s.promptTokens} tokens (${s.reusedTokens} reused, ` +
    `${s.promptMs.toFixed(0)} ms), ${s.generatedTokens} generated (${s.generateMs.toFixed(0)} ms), ` +
    `total ${s.totalMs.toFixed(0)} ms, stop: ${s.stopReason}`);
}

function parse(ctx: ServerContext, raw: unknown): ParsedRequest {
  const params = requireObject(METHOD, raw);
  const textDocument = requireObject(METHOD, params.textDocument, 'params.textDocument');
  const uri = requireString(METHOD, textDocument, 'uri', 'params.textDocument.uri');
  const document = ctx.documents.get(uri);
  if (!document) throw invalidParams(METHOD, `document ${uri} is not open (send textDocument/didOpen first)`);
  const cursor = offsetOf(document, params.position, 'params.position');
  const context = params.context === undefined ? undefined : requireObject(METHOD, params.context, 'params.context');
  const info = context?.selectedCompletionInfo;
  if (info === undefined || info === null) return { document, cursor };
  const selectedInfo = requireObject(METHOD, info, 'params.context.selectedCompletionInfo');
  const range = requireObject(METHOD, selectedInfo.range, 'params.context.selectedCompletionInfo.range');
  const startOffset = offsetOf(document, range.start, 'params.context.selectedCompletionInfo.range.start');
  const selectedText = selectedInfo.text;
  if (typeof selectedText !== 'string') {
    throw invalidParams(METHOD, 'params.context.selectedCompletionInfo.text must be a string');
  }
  if (startOffset > cursor) return { document, cursor };
  return { document, cursor, selected: { startOffset, text: selectedText } };
}

function offsetOf(document: TextDocument, raw: unknown, what: string, method: string = METHOD): number {
  const position = requireObject(method, raw, what);
  const line = requireInteger(method, position, 'line', 0, 2 ** 31 - 1, `${what}.line`);
  const character = requireInteger(method, position, 'character', 0, 2 ** 31 - 1, `${what}.character`);
  if (line >= document.lineCount) {
    throw invalidParams(method, `${what}.line ${line} is past the end of ${document.uri} (${document.lineCount} lines)`);
  }
  return document.offsetAt({ line, character });
}
