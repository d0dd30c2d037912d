// One generic host for every Fulcrum webview (plan, timeline, explain, what-if, layers): opens or
// reveals the panel, builds its page with the shared CSP builder, loads its data, re-sends the
// last data when the page reloads (no engine call), and routes the page's actions.
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { isFromView, type ToView } from '../../webviews/shared/messages';
import { VIEW_TITLES, makeNonce, webviewPageHtml, type ViewName } from '../../webviews/shared/page';

export interface PanelSpec<T> {
  view: ViewName;
  /** Produces the data to draw; called on open and on refresh(). */
  load(): Promise<T>;
  /** Handlers of the page's { type: 'action' } messages. */
  actions?: Record<string, (args: Record<string, unknown> | undefined, panel: HostedPanel<T>) => Thenable<unknown> | void>;
  /** Keep the page alive while hidden (panels with their own control state). */
  retainContextWhenHidden?: boolean;
}

const open = new Map<ViewName, HostedPanel<unknown>>();

export class HostedPanel<T> {
  private readonly disposables: vscode.Disposable[] = [];
  private lastData: T | undefined;
  private loading: Promise<void> | undefined;
  readonly panel: vscode.WebviewPanel;

  constructor(extensionUri: vscode.Uri, private spec: PanelSpec<T>, private readonly log: vscode.LogOutputChannel) {
    const bundleDir = vscode.Uri.joinPath(extensionUri, 'dist', 'webviews');
    this.panel = vscode.window.createWebviewPanel(`fulcrum.${spec.view}`, VIEW_TITLES[spec.view], vscode.ViewColumn.Beside, {
      enableScripts: true,
      localResourceRoots: [bundleDir],
      retainContextWhenHidden: spec.retainContextWhenHidden ?? false,
    });
    const webview = this.panel.webview;
    webview.html = webviewPageHtml({
      view: spec.view,
      cspSource: webview.cspSource,
      nonce: makeNonce(randomBytes),
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(bundleDir, `${spec.view}.js`)).toString(),
      styleUri: webview.asWebviewUri(vscode.Uri.joinPath(bundleDir, `${spec.view}.css`)).toString(),
    });
    this.disposables.push(
      webview.onDidReceiveMessage((message: unknown) => {
        if (!isFromView(message)) return;
        if (message.type === 'ready') {
          // The page (re)loaded, e.g. shown again after being hidden: redraw what it had.
          if (this.lastData !== undefined) void this.post({ type: 'data', data: this.lastData });
          else void this.refresh();
          return;
        }
        const handler = this.spec.actions?.[message.action];
        if (!handler) { this.log.appendLine(`${spec.view} panel: unknown action '${message.action}'`); return; }
        Promise.resolve(handler(message.args, this)).catch((err: unknown) => {
          const text = err instanceof Error ? err.message : String(err);
          this.log.appendLine(`${spec.view} panel: ${message.action} failed: ${text}`);
          void vscode.window.showErrorMessage(`Fulcrum: ${text}`);
        });
      }),
      this.panel.onDidDispose(() => this.dispose()),
    );
  }

  /** Replaces the panel's spec (a command opened it again with other inputs) and reloads. */
  update(spec: PanelSpec<T>): void {
    this.spec = spec;
    this.panel.reveal(undefined, true);
    void this.refresh();
  }

  /** Asks for fresh data; concurrent calls share one load. */
  refresh(): Promise<void> {
    this.loading ??= (async () => {
      try {
        await this.post({ type: 'status', message: 'Asking the engine…' });
        const data = await this.spec.load();
        this.lastData = data;
        await this.post({ type: 'data', data });
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        this.log.appendLine(`${this.spec.view} panel: ${message}`);
        await this.post({ type: 'error', message });
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  /** Sends data the host computed itself (e.g. a what-if result) and remembers it. */
  async show(data: T): Promise<void> {
    this.lastData = data;
    await this.post({ type: 'data', data });
  }

  async post(message: ToView<T>): Promise<void> {
    await this.panel.webview.postMessage(message);
  }

  private dispose(): void {
    if (open.get(this.spec.view) === this) open.delete(this.spec.view);
    for (const d of this.disposables) d.dispose();
  }
}

/** Opens the view's panel, or reveals the open one with the new spec. */
export function showPanel<T>(extensionUri: vscode.Uri, spec: PanelSpec<T>, log: vscode.LogOutputChannel): HostedPanel<T> {
  const existing = open.get(spec.view) as HostedPanel<T> | undefined;
  if (existing) { existing.update(spec); return existing; }
  const panel = new HostedPanel<T>(extensionUri, spec, log);
  open.set(spec.view, panel as HostedPanel<unknown>);
  return panel;
}

/** The open panel of a view, if any. */
export function openPanel<T>(view: ViewName): HostedPanel<T> | undefined {
  return open.get(view) as HostedPanel<T> | undefined;
}
