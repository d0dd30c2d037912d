// The "Fulcrum: Model Layers" webview panel: hosts webviews/layers and feeds it fulcrum/layers.
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { FulcrumRequests, type LayersResult, type ModelInfo } from '../engine/server/protocol';
import { isFromLayersView, type ToLayersView } from '../webviews/layers/messages';
import { layersPageHtml, makeNonce } from '../webviews/layers/page';
import { splitText } from './plan-summary';
import { planInputs, requestPlan } from './planner';

export class LayersPanel {
  private static current: LayersPanel | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  /** Opens the panel, or reveals and refreshes the open one. */
  static show(extensionUri: vscode.Uri, client: () => LanguageClient | undefined, log: vscode.LogOutputChannel): void {
    if (LayersPanel.current) {
      LayersPanel.current.panel.reveal();
      void LayersPanel.current.refresh();
      return;
    }
    LayersPanel.current = new LayersPanel(extensionUri, client, log);
  }

  /** Called when the engine loads another model, so an open panel shows it. */
  static refreshIfOpen(): void {
    void LayersPanel.current?.refresh();
  }

  private readonly panel: vscode.WebviewPanel;
  /** The last message drawn: re-sent when the page reloads (shown again), without asking the engine. */
  private last: ToLayersView | undefined;

  private constructor(extensionUri: vscode.Uri, private readonly client: () => LanguageClient | undefined,
    private readonly log: vscode.LogOutputChannel) {
    const bundleDir = vscode.Uri.joinPath(extensionUri, 'dist', 'webviews');
    this.panel = vscode.window.createWebviewPanel('fulcrum.layers', 'Fulcrum: Model Layers', vscode.ViewColumn.Beside, {
      enableScripts: true,
      localResourceRoots: [bundleDir],
    });
    const webview = this.panel.webview;
    webview.html = layersPageHtml({
      cspSource: webview.cspSource,
      nonce: makeNonce(randomBytes),
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(bundleDir, 'layers.js')).toString(),
      styleUri: webview.asWebviewUri(vscode.Uri.joinPath(bundleDir, 'layers.css')).toString(),
    });
    this.disposables.push(
      webview.onDidReceiveMessage((message: unknown) => {
        // The page says 'ready' each time it (re)loads, e.g. after being hidden and shown.
        if (isFromLayersView(message)) void (this.last ? this.post(this.last) : this.refresh());
      }),
      this.panel.onDidDispose(() => this.dispose()),
    );
  }

  private async refresh(): Promise<void> {
    const client = this.client();
    if (!client || !client.isRunning()) {
      await this.post({ type: 'status', message: 'The Fulcrum engine is not running; see Output › Fulcrum.' });
      return;
    }
    try {
      await this.post({ type: 'status', message: 'Asking the engine for the model layers…' });
      const data = await client.sendRequest<LayersResult>(FulcrumRequests.layers);
      // Where each layer runs is what the engine executes (the status bar's split), not the plan
      // panels' what-if plan for fulcrum.plan.hardware, which may be a GPU this machine lacks;
      // that plan is named beside it, marked as what-if (none before the machine is profiled).
      const info = await client.sendRequest<ModelInfo>(FulcrumRequests.modelInfo);
      const ex = info.summary?.path === data.model.path ? info.execution : undefined;
      const plan = await requestPlan(client, { ...planInputs(data.model.path), model: data.model.path }).catch(() => undefined);
      this.last = {
        type: 'layers', data,
        ...(ex ? { runsOn: ex.runsOn, split: ex.fallback ? `${ex.split}: ${ex.fallback}` : ex.split } : {}),
        ...(plan ? { whatIf: `${plan.hardware.name}: ${plan.chosenPolicy}, ${splitText(plan)}` } : {}),
      };
      await this.post(this.last);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.log.appendLine(`fulcrum/layers failed: ${message}`);
      await this.post({ type: 'error', message });
    }
  }

  private async post(message: ToLayersView): Promise<void> {
    await this.panel.webview.postMessage(message);
  }

  private dispose(): void {
    LayersPanel.current = undefined;
    for (const d of this.disposables) d.dispose();
  }
}
