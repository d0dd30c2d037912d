// Fulcrum: Select Model. Recent models or a file picker; before loading, the engine plans the
// model for this machine so the user sees whether it fits and the predicted speed.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { planInputs, requestPlan, requireClient } from '../planner';
import { splitText } from '../plan-summary';

const RECENT_KEY = 'fulcrum.recentModels';
const MAX_RECENT = 8;

export function registerSelectModel(context: vscode.ExtensionContext, client: () => LanguageClient | undefined): vscode.Disposable {
  return vscode.commands.registerCommand('fulcrum.selectModel', async (pathArg?: string) => {
    let file = pathArg;
    if (!file) {
      const recent = context.globalState.get<string[]>(RECENT_KEY, []);
      const items: (vscode.QuickPickItem & { path?: string })[] = [
        ...recent.map((p) => ({ label: p.split(/[\\/]/).pop() ?? p, description: p, path: p })),
        { label: '$(folder-opened) Browse for a GGUF file…' },
      ];
      const pick = await vscode.window.showQuickPick(items, { title: 'Fulcrum: Select Model', placeHolder: recent.length ? 'Recent models' : 'No recent models yet' });
      if (!pick) return;
      file = pick.path;
      if (!file) {
        const uris = await vscode.window.showOpenDialog({ canSelectMany: false, filters: { 'GGUF model': ['gguf'] }, title: 'Select a GGUF model' });
        file = uris?.[0]?.fsPath;
      }
    }
    if (!file) return;
    // Plan it first (the same settings as the plan panel, with this file as the model).
    let verdict = '';
    try {
      const inputs = { ...planInputs(undefined), model: file };
      const plan = await requestPlan(requireClient(client()), inputs);
      verdict = `${plan.memory.fits ? 'Fits' : 'Does not fit'} on ${plan.hardware.name}: ${plan.chosenPolicy}, ${splitText(plan)}, ` +
        `${plan.predicted.tokensPerSecond.toFixed(1)} tokens/s predicted.`;
    } catch (err) {
      verdict = `Could not plan it: ${err instanceof Error ? err.message : String(err)}.`;
    }
    const choice = pathArg ? 'Load' : await vscode.window.showInformationMessage(`Fulcrum: ${file}\n${verdict}`, { modal: true }, 'Load');
    if (choice !== 'Load') return;
    const recent = context.globalState.get<string[]>(RECENT_KEY, []).filter((p) => p !== file);
    await context.globalState.update(RECENT_KEY, [file, ...recent].slice(0, MAX_RECENT));
    // The setting change makes the extension load it (see extension.ts).
    await vscode.workspace.getConfiguration('fulcrum').update('modelPath', file, vscode.ConfigurationTarget.Global);
  });
}
