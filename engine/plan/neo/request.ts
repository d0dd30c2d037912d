// A request as the online schedulers (NEO, APEX) and the online simulator see it.

export type RequestWhere = 'waiting' | 'gpu' | 'cpu' | 'done';

export interface OnlineRequest {
  id: number;
  arrivalMs: number;
  promptTokens: number;
  /** Tokens to generate (the request stops after this many). */
  outputTokens: number;
  /** Tokens generated so far (prefill produces the first). */
  generated: number;
  where: RequestWhere;
  /** APEX asynchronous overlap: decoder layers of the current token already done on the CPU. */
  aoLayer: number;
  firstTokenMs?: number;
  finishMs?: number;
}

/** Tokens whose K,V are cached (and read by the next decode step). */
export function contextTokens(r: OnlineRequest): number {
  return r.promptTokens + r.generated;
}

/**
 * KV-cache blocks a request needs to take one more step. Decision (NEO leaves the CPU-KV block
 * size open, digest 003 §6): 16-token blocks on both pools, as vLLM/SwiftLLM's GPU default.
 */
export const KV_BLOCK_TOKENS = 16;
export function blocksFor(tokens: number): number {
  return Math.ceil(tokens / KV_BLOCK_TOKENS);
}

export function makeRequest(id: number, arrivalMs: number, promptTokens: number, outputTokens: number): OnlineRequest {
  if (!Number.isInteger(promptTokens) || promptTokens < 1) throw new Error(`request ${id}: prompt tokens must be an integer ≥ 1, got ${promptTokens}`);
  if (!Number.isInteger(outputTokens) || outputTokens < 1) throw new Error(`request ${id}: output tokens must be an integer ≥ 1, got ${outputTokens}`);
  return { id, arrivalMs, promptTokens, outputTokens, generated: 0, where: 'waiting', aoLayer: 0 };
}
