// Fulcrum: Profile Machine. Quick or full microbenchmarks (or the cached profile), with a
// progress notification whose Cancel button cancels the engine's request ($/cancelRequest).
import * as vscode from 'vscode';
import { CancellationTokenSource, WorkDoneProgress, type LanguageClient, type WorkDoneProgressBegin, type WorkDoneProgressEnd, type WorkDoneProgressReport } from 'vscode-languageclient/node';
import { FulcrumRequests, type ProfileParams, type ProfileResult } from '../../engine/server/protocol';
import { requireClient } from '../planner';

export function describeProfile(r: ProfileResult): string {
  const p = r.profile;
  const gpu = p.gpu ? `${p.gpu.name}, ${(p.gpu.memoryBytes / 2 ** 30).toFixed(1)} GiB` : 'no GPU';
  return `${p.cpu.name} (${p.cpu.cores} cores, ${p.cpu.isa}), ${(p.memory.totalBytes / 2 ** 30).toFixed(0)} GiB RAM, ${gpu}${r.cached ? ' (cached profile)' : ''}`;
}

export function registerProfileCommand(client: () => LanguageClient | undefined, log: vscode.LogOutputChannel): vscode.Disposable {
  return vscode.commands.registerCommand('fulcrum.profileMachine', async (mode?: 'quick' | 'full' | 'cached') => {
    const pick = mode ?? (await vscode.window.showQuickPick([
      { label: 'Quick profile', description: 'a few seconds; enough for planning', mode: 'quick' as const },
      { label: 'Full profile', description: 'every kernel and thread count; about a minute', mode: 'full' as const },
      { label: 'Show the cached profile', description: 'no measurement', mode: 'cached' as const },
    ], { title: 'Fulcrum: Profile Machine' }))?.mode;
    if (!pick) return;
    const engine = requireClient(client());
    const token = `fulcrum-profile-${Date.now()}`;
    const params: ProfileParams = pick === 'cached' ? { quick: false, refresh: false } : { quick: pick === 'quick', refresh: true, workDoneToken: token };
    const result = await vscode.window.withProgress({
      location: vscode.ProgressLocation.Notification, title: 'Fulcrum: profiling this machine', cancellable: true,
    }, async (progress, cancel) => {
      const source = new CancellationTokenSource();
      cancel.onCancellationRequested(() => source.cancel());
      let last = 0;
      const sub = engine.onProgress(WorkDoneProgress.type, token, (p) => {
        const v = p as WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;
        if (v.kind === 'end') return;
        const pct = v.percentage ?? last;
        progress.report({ increment: Math.max(0, pct - last), ...(v.message ? { message: v.message } : {}) });
        last = pct;
      });
      try {
        return await engine.sendRequest<ProfileResult>(FulcrumRequests.profile, params, source.token);
      } catch (err) {
        if (source.token.isCancellationRequested) return undefined;
        throw err;
      } finally {
        sub.dispose();
      }
    });
    if (!result) { void vscode.window.showInformationMessage('Fulcrum: profiling cancelled.'); return; }
    const text = describeProfile(result);
    log.appendLine(`profile: ${text}${result.note ? ` (${result.note})` : ''}`);
    void vscode.window.showInformationMessage(`Fulcrum: ${text}`);
  });
}
