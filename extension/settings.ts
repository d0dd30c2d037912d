// The extension's settings (contributes.configuration in package.json), read in one place.
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';

export interface FulcrumSettings {
  /** Absolute path of the GGUF model, or undefined when unset. */
  modelPath: string | undefined;
  /** CPU threads, or undefined for the runtime's default. */
  threads: number | undefined;
  completionsEnabled: boolean;
  /** Prompt budget of a completion in tokens. */
  promptBudget: number;
  /** Most tokens a completion may generate. */
  maxTokens: number;
  /** Wait after the last keystroke before asking the engine, ms. */
  debounceMs: number;
  /** Cap on generating one completion, ms (0: none). */
  timeLimitMs: number;
  /** Show the text so far of a completion still decoding after this many ms (0: wait for the end). */
  showPartialAfterMs: number;
  /** Most time a completion spends on prompt text not cached yet, ms; a longer prompt is cut to the text nearest the cursor (0: no limit). */
  maxPromptMs: number;
  /** Chunks of recently used other files go before the prompt. */
  extraContext: boolean;
  /** Evaluate every prompt token after a keystroke (no shifted reuse of the suffix's KV). */
  exactPrompt: boolean;
  /** Where the model executes: 'auto' (a real GPU when found, else the CPU), 'cpu', 'vulkan' (a GPU) or 'loopback' (emulated). */
  device: 'auto' | 'cpu' | 'vulkan' | 'loopback';
  /** Device memory the plan may use, e.g. '6G'; undefined: the device's own budget. */
  vram: string | undefined;
  /** The policy whose plan executes. */
  policy: string;
  /** The KV cache's element format: 'F16', or 'Q8_0' (8-bit blocks of 32, 53 % of the memory; attention on the CPU). */
  kvFormat: 'F16' | 'Q8_0';
  /** Remote completion server URL (llama-server, OpenAI-compatible, another Fulcrum); undefined: local. */
  endpoint: string | undefined;
  endpointKind: 'auto' | 'infill' | 'openai';
  endpointToken: string | undefined;
}

/** The settings the engine applies to every completion (sent at start and on change). */
export const COMPLETION_SETTING_KEYS = ['completions.promptBudget', 'completions.maxTokens', 'completions.timeLimitMs', 'completions.showPartialAfterMs', 'completions.maxPromptMs', 'completions.extraContext', 'completions.exactPrompt', 'completions.endpoint', 'completions.endpointKind', 'completions.token'] as const;

function integerSetting(config: vscode.WorkspaceConfiguration, key: string, fallback: number, min: number, max: number): number {
  const value = config.get<number>(key, fallback);
  return Number.isInteger(value) && value >= min && value <= max ? value : fallback;
}

export function readSettings(): FulcrumSettings {
  const config = vscode.workspace.getConfiguration('fulcrum');
  const rawPath = config.get<string>('modelPath', '').trim();
  const threads = config.get<number>('threads', 0);
  return {
    modelPath: rawPath ? resolveModelPath(rawPath) : undefined,
    threads: Number.isInteger(threads) && threads > 0 ? threads : undefined,
    completionsEnabled: config.get<boolean>('completions.enabled', true),
    promptBudget: integerSetting(config, 'completions.promptBudget', 1024, 64, 32768),
    maxTokens: integerSetting(config, 'completions.maxTokens', 64, 1, 4096),
    debounceMs: integerSetting(config, 'completions.debounceMs', 100, 0, 5000),
    timeLimitMs: integerSetting(config, 'completions.timeLimitMs', 1500, 0, 600000),
    showPartialAfterMs: integerSetting(config, 'completions.showPartialAfterMs', 300, 0, 600000),
    maxPromptMs: integerSetting(config, 'completions.maxPromptMs', 1000, 0, 600000),
    extraContext: config.get<boolean>('completions.extraContext', false),
    exactPrompt: config.get<boolean>('completions.exactPrompt', false),
    device: (['auto', 'cpu', 'vulkan', 'loopback'] as const).find((d) => d === config.get<string>('execution.device', 'auto')) ?? 'auto',
    vram: config.get<string>('execution.vram', '').trim() || undefined,
    policy: config.get<string>('execution.policy', 'auto') || 'auto',
    kvFormat: (['F16', 'Q8_0'] as const).find((f) => f === config.get<string>('execution.kvFormat', 'F16')) ?? 'F16',
    endpoint: config.get<string>('completions.endpoint', '').trim() || undefined,
    endpointKind: (['auto', 'infill', 'openai'] as const).find((k) => k === config.get<string>('completions.endpointKind', 'auto')) ?? 'auto',
    endpointToken: config.get<string>('completions.token', '') || undefined,
  };
}

/** Expands `~` and `${workspaceFolder}`; a relative path is taken from the first workspace folder. */
function resolveModelPath(raw: string): string {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  let p = raw.replace(/\$\{workspaceFolder\}/g, folder ?? '');
  if (p === '~' || p.startsWith('~/')) p = path.join(os.homedir(), p.slice(1));
  if (!path.isAbsolute(p) && folder) p = path.join(folder, p);
  return path.resolve(p);
}
