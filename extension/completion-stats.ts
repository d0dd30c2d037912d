// The status-bar text and the log line of the last completion (llama.vscode's line plus the
// prompt split): prompt tokens, how many of them came from the KV cache, generated tokens and
// the time. Pure functions, so they are tested without VS Code.
import type { CompletionStats } from '../engine/server/protocol';

/** Short text for the status bar, e.g. "412 tok (380 reused) + 18 · 642 ms · 32.7 tok/s"; a cut prompt "109 of 941 tok (…". */
export function statsSummary(s: CompletionStats): string {
  if (s.stopReason === 'cached') return 'from cache';
  const reused = s.reusedTokens !== undefined ? ` (${s.reusedTokens} reused)` : '';
  const of = s.wholePromptTokens !== undefined ? ` of ${s.wholePromptTokens}` : '';
  return `${s.promptTokens}${of} tok${reused} + ${s.generatedTokens} · ${Math.round(totalMs(s))} ms · ${s.tokensPerSecond.toFixed(1)} tok/s`;
}

/** One line for the log and the tooltip. */
export function statsLine(s: CompletionStats): string {
  if (s.stopReason === 'cached') return 'last completion: served from the completion cache (typed through a shown suggestion)';
  const reused = s.reusedTokens ?? 0;
  const promptRate = s.promptMs > 0 ? ((s.promptTokens - reused) / s.promptMs) * 1000 : 0;
  return `last completion: prompt ${s.promptTokens} tokens (${reused} reused from the KV cache, ` +
    `${s.promptTokens - reused} evaluated in ${s.promptMs.toFixed(0)} ms, ${promptRate.toFixed(0)} tok/s), ` +
    `generated ${s.generatedTokens} tokens in ${s.generateMs.toFixed(0)} ms (${s.tokensPerSecond.toFixed(1)} tok/s), ` +
    `total ${totalMs(s).toFixed(0)} ms${s.format ? `, format ${s.format}` : ''}, stop: ${stopWords(s.stopReason)}` +
    (s.wholePromptTokens !== undefined ? `; the prompt was cut to the text nearest the cursor (${s.promptTokens} of ${s.wholePromptTokens} tokens) to answer within fulcrum.completions.maxPromptMs, and the whole prompt is read in the background for the next completions` : '');
}

function totalMs(s: CompletionStats): number {
  return s.totalMs ?? s.promptMs + s.generateMs;
}

function stopWords(reason: CompletionStats['stopReason']): string {
  switch (reason) {
    case 'eos': return 'the model ended it';
    case 'length': return 'the token limit (fulcrum.completions.maxTokens)';
    case 'context': return 'the context is full';
    case 'time': return 'the time limit (fulcrum.completions.timeLimitMs)';
    case 'rule': return 'a completion rule (end of line, scope or repetition)';
    case 'stop': return 'a stop string';
    case 'cancelled': return 'cancelled';
    case 'cached': return 'cache';
    case 'partial': return 'shown while decoding went on (fulcrum.completions.showPartialAfterMs)';
  }
}
