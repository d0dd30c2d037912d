// The completion settings a client sends (in initializationOptions or fulcrum/completionOptions),
// validated into server options.
import type { ServerOptions } from './context';
import { invalidParams, optionalInteger } from './validate';
import { parseRemoteOptions } from './remote-options';

/** The completion settings in `params` (initializationOptions or fulcrum/completionOptions), validated. */
export function parseCompletionOptions(method: string, params: Record<string, unknown>, where: string): Partial<ServerOptions> {
  const parsed: Partial<ServerOptions> = {};
  const maxTokens = optionalInteger(method, params, 'maxCompletionTokens', 1, 4096, `${where}.maxCompletionTokens`);
  if (maxTokens !== undefined) parsed.maxCompletionTokens = maxTokens;
  const budget = optionalInteger(method, params, 'promptBudget', 64, 1 << 20, `${where}.promptBudget`);
  if (budget !== undefined) parsed.promptBudget = budget;
  const timeLimit = optionalInteger(method, params, 'completionTimeLimitMs', 0, 600_000, `${where}.completionTimeLimitMs`);
  if (timeLimit !== undefined) parsed.completionTimeLimitMs = timeLimit;
  const showPartial = optionalInteger(method, params, 'showPartialAfterMs', 0, 600_000, `${where}.showPartialAfterMs`);
  if (showPartial !== undefined) parsed.showPartialAfterMs = showPartial;
  const maxPrompt = optionalInteger(method, params, 'maxPromptMs', 0, 600_000, `${where}.maxPromptMs`);
  if (maxPrompt !== undefined) parsed.maxPromptMs = maxPrompt;
  if (params.completionCache !== undefined) {
    if (typeof params.completionCache !== 'boolean') throw invalidParams(method, `${where}.completionCache must be true or false`);
    parsed.completionCache = params.completionCache;
  }
  if (params.extraContext !== undefined) {
    if (typeof params.extraContext !== 'boolean') throw invalidParams(method, `${where}.extraContext must be true or false`);
    parsed.extraContext = params.extraContext;
  }
  if (params.exactPrompt !== undefined) {
    if (typeof params.exactPrompt !== 'boolean') throw invalidParams(method, `${where}.exactPrompt must be true or false`);
    parsed.exactPrompt = params.exactPrompt;
  }
  Object.assign(parsed, parseRemoteOptions(method, params, where));
  return parsed;
}
