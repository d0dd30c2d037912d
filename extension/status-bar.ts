// The status bar item: the engine's state and the last completion's decode speed.
import * as vscode from 'vscode';
import type { CompletionStats, EngineState } from '../engine/server/protocol';
import { statsLine, statsSummary } from './completion-stats';

export type ShownState = EngineState | 'starting' | 'stopped';

const ICONS: Record<ShownState, string> = {
  starting: '$(loading~spin)',
  'no-model': '$(circle-slash)',
  loading: '$(loading~spin)',
  ready: '$(check)',
  generating: '$(sync~spin)',
  error: '$(error)',
  stopped: '$(debug-disconnect)',
};

const LABELS: Record<ShownState, string> = {
  starting: 'starting',
  'no-model': 'no model',
  loading: 'loading model',
  ready: 'ready',
  generating: 'generating',
  error: 'error',
  stopped: 'stopped',
};

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private state: ShownState = 'starting';
  private detail: string | undefined;
  private lastStats: CompletionStats | undefined;
  private completionsEnabled = true;

  constructor() {
    this.item = vscode.window.createStatusBarItem('fulcrum.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'Fulcrum';
    this.item.command = 'fulcrum.showOutput';
    this.render();
    this.item.show();
  }

  get current(): ShownState {
    return this.state;
  }

  setState(state: ShownState, detail?: string): void {
    this.state = state;
    this.detail = detail;
    this.render();
  }

  /** Mirrors fulcrum.completions.enabled, so turning completions off is visible. */
  setCompletionsEnabled(enabled: boolean): void {
    this.completionsEnabled = enabled;
    this.render();
  }

  setStats(stats: CompletionStats): void {
    this.lastStats = stats;
    this.render();
  }

  dispose(): void {
    this.item.dispose();
  }

  private render(): void {
    const speed = this.lastStats ? ` · ${statsSummary(this.lastStats)}` : '';
    const off = this.completionsEnabled ? '' : ' · completions off';
    this.item.text = `${ICONS[this.state]} Fulcrum: ${LABELS[this.state]}${speed}${off}`;
    const lines = [`Fulcrum engine: ${LABELS[this.state]}`];
    if (!this.completionsEnabled) lines.push('Inline completions are off (fulcrum.completions.enabled)');
    if (this.detail) lines.push(this.detail);
    if (this.lastStats) lines.push(statsLine(this.lastStats));
    lines.push('Click to show the log');
    this.item.tooltip = lines.join('\n');
    this.item.backgroundColor = this.state === 'error'
      ? new vscode.ThemeColor('statusBarItem.errorBackground')
      : undefined;
  }
}
