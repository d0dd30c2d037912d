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
}

export function readSettings(): FulcrumSettings {
  const config = vscode.workspace.getConfiguration('fulcrum');
  const rawPath = config.get<string>('modelPath', '').trim();
  const threads = config.get<number>('threads', 0);
  return {
    modelPath: rawPath ? resolveModelPath(rawPath) : undefined,
    threads: Number.isInteger(threads) && threads > 0 ? threads : undefined,
    completionsEnabled: config.get<boolean>('completions.enabled', true),
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
