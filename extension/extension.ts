// The Fulcrum VS Code extension: starts the engine as a language server, shows its state in
// the status bar, and hosts the panels. All logic lives in the engine; this only translates.
import * as vscode from 'vscode';
import { State, type LanguageClient } from 'vscode-languageclient/node';
import type { ModelSummary } from '../engine/server/protocol';
import { FulcrumNotifications, FulcrumRequests, type CompletionStats, type FeedbackParams, type LoadModelParams, type RemoteStatusParams, type StateParams, type ModelInfo } from '../engine/server/protocol';
import { completionOptions, createClient } from './client';
import { registerPartialCompletions } from './partial-completion';
import { statsLine } from './completion-stats';
import { registerPlanViews } from './commands/plan-views';
import { registerHttpCommands, startHttpServer } from './commands/http-server';
import { registerProfileCommand } from './commands/profile';
import { registerSelectModel } from './commands/select-model';
import { LayersPanel } from './layers-panel';
import { splitText } from './plan-summary';
import { planInputs, requestPlan } from './planner';
import { RestartPolicy } from './restart-policy';
import { COMPLETION_SETTING_KEYS, readSettings } from './settings';
import { StatusBar } from './status-bar';
import { registerWarmUp, warmActiveEditor } from './warm-up';

let client: LanguageClient | undefined;
/** The model file the engine has loaded (from fulcrum/state), for planner requests. */
let loadedModel: string | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('Fulcrum', { log: true });
  const status = new StatusBar();
  const policy = new RestartPolicy();
  context.subscriptions.push(output, status);

  const languageClient = createClient(context.extensionPath, output, policy, {
    // With a remote endpoint the engine completes there even without a local model.
    completionsWanted: () => readSettings().completionsEnabled && (readSettings().endpoint !== undefined || status.current === 'ready' || status.current === 'generating'),
    onRestart: (attempt, delayMs) => {
      output.appendLine(`engine exited; restart ${attempt} in ${delayMs} ms`);
      status.setState('starting', `restart ${attempt} after the engine exited`);
    },
    onGiveUp: (crashes) => {
      loadedModel = undefined;
      status.setState('error', `the engine exited ${crashes} times in a short time`);
      void vscode.window.showErrorMessage(
        `Fulcrum: the engine exited ${crashes} times within ${policy.windowMs / 60_000} minutes and was not restarted. See Output › Fulcrum.`,
        'Show Log', 'Restart',
      ).then((choice) => {
        if (choice === 'Show Log') output.show();
        if (choice === 'Restart') void vscode.commands.executeCommand('fulcrum.restartEngine');
      });
    },
  });
  client = languageClient;
  // Warm-ups are for the local model (an endpoint warms its own cache when asked).
  const localCompletionsWanted = () => readSettings().completionsEnabled && readSettings().endpoint === undefined && (status.current === 'ready' || status.current === 'generating');

  context.subscriptions.push(
    languageClient.onDidChangeState((e) => {
      if (e.newState === State.Starting) status.setState('starting');
      // After the restart policy gave up the state stays 'error', not just 'stopped'.
      else if (e.newState === State.Stopped && status.current !== 'error') status.setState('stopped');
    }),
    languageClient.onNotification(FulcrumNotifications.state, (p: StateParams) => {
      const previous = status.current;
      status.setState(p.state, p.message ?? p.modelPath);
      // Only a newly loaded model changes the layers and the plan; the ready state after every
      // completion must not redraw the panels (they would flash and lose their scroll position).
      if (p.state === 'ready' && (previous === 'loading' || previous === 'starting' || loadedModel !== p.modelPath)) {
        loadedModel = p.modelPath;
        // The model is ready: the focused document's prompt is evaluated before the first completion asks.
        warmActiveEditor(languageClient, localCompletionsWanted);
        if (vscode.workspace.getConfiguration('fulcrum').get<boolean>('http.enabled', false)) {
          startHttpServer(languageClient, output, false).catch((e: unknown) => output.warn(`HTTP API: ${e instanceof Error ? e.message : String(e)}`));
        }
        LayersPanel.refreshIfOpen();
        void refreshPlanSummary(status, output);
      }
      if (p.state === 'no-model' || p.state === 'error') { loadedModel = undefined; status.setPlan(undefined); }
      if (p.state === 'error' && p.message) void vscode.window.showErrorMessage(`Fulcrum: ${p.message}`, 'Show Log')
        .then((choice) => { if (choice) output.show(); });
    }),
    registerWarmUp(() => client, localCompletionsWanted),
    registerPartialCompletions(languageClient, output),
    languageClient.onNotification(FulcrumNotifications.feedback, (f: FeedbackParams) => {
      status.setFeedback(f.message, f.noisyProfile !== undefined ? 'noisy' : f.disagreements.length > 0);
      output.warn(`measured feedback: ${f.message}`);
    }),
    languageClient.onNotification(FulcrumNotifications.remote, (r: RemoteStatusParams) => {
      status.setRemoteStatus(r);
      if (!r.ok) output.warn(`completion endpoint failed: ${r.reason ?? ''}; ${r.fallback === 'local' ? 'completed with the local model' : 'no local model to fall back to'}`);
    }),
    languageClient.onNotification(FulcrumNotifications.stats, (s: CompletionStats) => {
      status.setStats(s);
      output.info(statsLine(s));
    }),
    // Accept the next word / line of the shown suggestion (VS Code's partial accept).
    vscode.commands.registerCommand('fulcrum.acceptWord', () => vscode.commands.executeCommand('editor.action.inlineSuggest.acceptNextWord')),
    vscode.commands.registerCommand('fulcrum.acceptLine', () => vscode.commands.executeCommand('editor.action.inlineSuggest.acceptNextLine')),
    vscode.commands.registerCommand('fulcrum.showModelLayers', () => LayersPanel.show(context.extensionUri, () => client, output)),
    ...registerPlanViews({
      extensionUri: context.extensionUri, log: output, client: () => client, loadedModel: () => loadedModel,
    }),
    registerProfileCommand(() => client, output),
    ...registerHttpCommands(() => client, output),
    registerSelectModel(context, () => client),
    vscode.commands.registerCommand('fulcrum.showOutput', () => output.show()),
    vscode.commands.registerCommand('fulcrum.restartEngine', async () => {
      policy.reset();
      status.setState('starting');
      await languageClient.restart();
    }),
    vscode.commands.registerCommand('fulcrum.toggleCompletions', async () => {
      const config = vscode.workspace.getConfiguration('fulcrum');
      await config.update('completions.enabled', !config.get<boolean>('completions.enabled', true), vscode.ConfigurationTarget.Global);
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('fulcrum.completions.enabled')) status.setCompletionsEnabled(readSettings().completionsEnabled);
      if (e.affectsConfiguration('fulcrum.completions.endpoint')) status.setEndpoint(readSettings().endpoint);
      // The model file and thread count apply at load: reload with the new values.
      if (e.affectsConfiguration('fulcrum.modelPath') || e.affectsConfiguration('fulcrum.threads')) void loadConfiguredModel(output);
      // Completion settings apply from the next completion on, without reloading the model.
      if (COMPLETION_SETTING_KEYS.some((key) => e.affectsConfiguration(`fulcrum.${key}`)) && languageClient.isRunning()) {
        void languageClient.sendNotification(FulcrumNotifications.completionOptions, completionOptions(readSettings()));
      }
      if (e.affectsConfiguration('fulcrum.plan')) void refreshPlanSummary(status, output);
    }),
  );

  status.setState('starting');
  status.setCompletionsEnabled(readSettings().completionsEnabled);
  status.setEndpoint(readSettings().endpoint);
  try {
    await languageClient.start();
  } catch (err) {
    // The client has logged it; the restart policy or the error state covers the rest.
    output.appendLine(`engine failed to start: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Plans the loaded model with the fulcrum.plan.* settings and shows its split in the status bar. */
async function refreshPlanSummary(status: StatusBar, output: vscode.LogOutputChannel): Promise<void> {
  // Not isRunning(): a small model can be ready before the client has finished starting, and
  // sendRequest waits for the start.
  if (!client) return;
  // The status bar describes the loaded model (fulcrum.plan.model only redirects the panels).
  if (!loadedModel) { status.setPlan(undefined); return; }
  const model = loadedModel;
  const inputs = { ...planInputs(model), model };
  // An answer that arrives after the engine exited (or loaded another model) describes nothing
  // that runs: it must not put a split beside "error".
  const current = (): boolean => loadedModel === model && status.current !== 'error' && status.current !== 'stopped';
  try {
    // A model that executes on a device shows the split that runs (and any fallback to the CPU).
    // The status bar shows what runs: the executed split, or "CPU only". The plan panels' plan for
    // fulcrum.plan.hardware (often a GPU preset this machine lacks) goes in the tooltip, marked so.
    const info = await client.sendRequest<ModelInfo>(FulcrumRequests.modelInfo);
    if (!current()) return;
    const ex = info.execution;
    if (ex && ex.device !== 'cpu') {
      status.setPlan(ex.split, `Executing: ${ex.policy} on ${ex.device}${ex.fallback ? ` — fell back to the CPU: ${ex.fallback}` : ''}`);
      return;
    }
    const running = `Executing: on the CPU${ex?.fallback ? ` (the device failed: ${ex.fallback})` : ''}`;
    try {
      const plan = await requestPlan(client, inputs);
      if (!current()) return;
      status.setPlan('CPU only', `${running}\nPlan panels (what-if for ${plan.hardware.name}): ${plan.chosenPolicy}, ${splitText(plan)}, ${plan.predicted.tokensPerSecond.toFixed(1)} tokens/s predicted`);
    } catch (err) {
      if (!current()) return;
      status.setPlan('CPU only', `${running}\nNo plan for the panels: ${err instanceof Error ? err.message : String(err)}`);
    }
  } catch (err) {
    // No cached profile for 'this' is common before Profile Machine: say so in the tooltip.
    const message = err instanceof Error ? err.message : String(err);
    output.appendLine(`plan for the status bar: ${message}`);
    if (current()) status.setPlan(undefined, `No plan: ${message}`);
  }
}

async function loadConfiguredModel(output: vscode.LogOutputChannel): Promise<void> {
  const settings = readSettings();
  if (!client?.isRunning() || settings.modelPath === undefined) return;
  try {
    const params: LoadModelParams = {
      path: settings.modelPath,
      ...(settings.threads !== undefined ? { threads: settings.threads } : {}),
      device: settings.device, policy: settings.policy, kvFormat: settings.kvFormat, ...(settings.vram ? { vram: settings.vram } : {}),
    };
    await client.sendRequest<ModelSummary>(FulcrumRequests.loadModel, params);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    output.appendLine(message);
    void vscode.window.showErrorMessage(`Fulcrum: ${message}`);
  }
}

export async function deactivate(): Promise<void> {
  await client?.stop();
  client = undefined;
}
