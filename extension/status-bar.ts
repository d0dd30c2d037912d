// The status bar item: the engine's state, the last completion's decode speed and the split of
// the current plan ("GPU 18/28 · KV host"). Clicking opens the plan panel; the tooltip is the
// menu of Fulcrum's commands.
import * as vscode from 'vscode';
import type { CompletionStats, EngineState, RemoteStatusParams } from '../engine/server/protocol';
import { statsLine, statsSummary } from './completion-stats';
import { remoteText } from './remote-status';

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

/** The status bar's menu (tooltip links), in the order people need them. */
const MENU: [string, string][] = [
  ['Offload Plan', 'fulcrum.showPlan'], ['Timeline', 'fulcrum.showTimeline'], ['Explain', 'fulcrum.explainDecision'],
  ['What-If', 'fulcrum.whatIf'], ['Select Model', 'fulcrum.selectModel'], ['Profile Machine', 'fulcrum.profileMachine'],
  ['Toggle Completions', 'fulcrum.toggleCompletions'], ['Model Layers', 'fulcrum.showModelLayers'], ['Log', 'fulcrum.showOutput'],
];

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private state: ShownState = 'starting';
  private detail: string | undefined;
  private lastStats: CompletionStats | undefined;
  private completionsEnabled = true;
  private split: string | undefined;
  private planLine: string | undefined;
  /** The last measured-feedback message (engine's fulcrum/feedback): the profile disagrees with what runs. */
  private feedback: { message: string; off: boolean | 'noisy' } | undefined;
  /** fulcrum.completions.endpoint (undefined: completions run on the local model). */
  private endpoint: string | undefined;
  /** What the last completion through the endpoint did (undefined: none since it was set). */
  private remote: RemoteStatusParams | undefined;

  constructor() {
    this.item = vscode.window.createStatusBarItem('fulcrum.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'Fulcrum';
    this.item.command = 'fulcrum.showPlan';
    this.render();
    this.item.show();
  }

  get current(): ShownState {
    return this.state;
  }

  setState(state: ShownState, detail?: string): void {
    this.state = state;
    this.detail = detail;
    // An engine that stopped or gave up has no model loaded: its last completion's speed and its
    // plan's split would read as the state of a model that is gone (beside a red "error").
    if (state === 'error' || state === 'stopped') {
      this.lastStats = undefined;
      this.split = undefined;
      this.planLine = undefined;
    }
    this.render();
  }

  /** Mirrors fulcrum.completions.enabled, so turning completions off is visible. */
  setCompletionsEnabled(enabled: boolean): void {
    this.completionsEnabled = enabled;
    this.render();
  }

  /** The endpoint setting: the status bar says where completions run before the first one. */
  setEndpoint(endpoint: string | undefined): void {
    if (endpoint !== this.endpoint) this.remote = undefined;
    this.endpoint = endpoint;
    this.render();
  }

  /** Where the last completion ran when an endpoint is set, or why the endpoint failed. */
  setRemoteStatus(status: RemoteStatusParams): void {
    this.remote = status;
    // Nothing completed: the speed of an earlier completion would read as this one's.
    if (!status.ok && status.fallback === 'none') this.lastStats = undefined;
    this.render();
  }

  setStats(stats: CompletionStats): void {
    this.lastStats = stats;
    this.render();
  }

  /** The split of the plan for the loaded model, or undefined when there is none (or planning failed). */
  setPlan(split: string | undefined, planLine?: string): void {
    this.split = split;
    this.planLine = planLine;
    this.render();
  }

  /**
   * Measured steps disagree with the profile (`off`: a warning mark in the text), the profile in
   * use was measured on a busy machine ('noisy'), or a re-measure finished; the message goes into
   * the tooltip.
   */
  setFeedback(message: string, off: boolean | 'noisy'): void {
    this.feedback = { message, off };
    this.render();
  }

  dispose(): void {
    this.item.dispose();
  }

  private render(): void {
    const speed = this.lastStats ? ` · ${statsSummary(this.lastStats)}` : '';
    const off = this.completionsEnabled ? '' : ' · completions off';
    const split = this.split ? ` · ${this.split}` : '';
    const remote = this.endpoint ? ` · ${remoteText(this.endpoint, this.remote)}` : '';
    // With an endpoint, 'no model' means no local one: completions still run remotely.
    const label = this.endpoint && this.state === 'no-model' ? 'no local model' : LABELS[this.state];
    const profileOff = this.feedback?.off === 'noisy' ? ' · $(warning) profile noisy' : this.feedback?.off ? ' · $(warning) profile off' : '';
    this.item.text = `${ICONS[this.state]} Fulcrum: ${label}${speed}${remote}${split}${off}${profileOff}`;
    const lines = [`Fulcrum engine: ${label}`];
    if (this.endpoint) lines.push(`Completions go to ${this.endpoint} (fulcrum.completions.endpoint)`);
    if (this.remote && !this.remote.ok) lines.push(`The endpoint failed: ${this.remote.reason ?? 'no reason given'}; ${this.remote.fallback === 'local' ? 'the local model completed instead' : 'no local model to fall back to'}`);
    if (this.planLine) lines.push(this.planLine);
    if (!this.completionsEnabled) lines.push('Inline completions are off (fulcrum.completions.enabled)');
    if (this.detail) lines.push(this.detail);
    if (this.lastStats) lines.push(statsLine(this.lastStats));
    if (this.feedback) lines.push(`Measured feedback: ${this.feedback.message}`);
    const tooltip = new vscode.MarkdownString(lines.map((l) => l.replace(/[\\`*_{}[\]()#+\-!|<>]/g, '\\$&')).join('  \n'));
    tooltip.appendMarkdown('\n\n---\n\n' + MENU.map(([title, command]) => `[${title}](command:${command})`).join(' · '));
    tooltip.isTrusted = { enabledCommands: MENU.map(([, command]) => command) };
    tooltip.supportThemeIcons = true;
    this.item.tooltip = tooltip;
    // A failed endpoint with nothing to fall back to means no completions at all: make it stand out.
    this.item.backgroundColor = this.state === 'error'
      ? new vscode.ThemeColor('statusBarItem.errorBackground')
      : this.remote?.ok === false && this.remote.fallback === 'none' ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
  }
}
