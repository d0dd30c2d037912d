// Runs inside the VS Code extension host (see run.ts). A small self-contained runner: the
// extension host calls run() and a rejection fails the run.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';

const tests: [string, () => Promise<void>][] = [];
const it = (name: string, fn: () => Promise<void>) => { tests.push([name, fn]); };

async function until<T>(probe: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

it('activates and registers its commands', async () => {
  const ext = vscode.extensions.getExtension('fulcrum.fulcrum');
  assert.ok(ext, 'the extension is installed in development mode');
  await ext.activate();
  const commands = await vscode.commands.getCommands(true);
  for (const c of ['fulcrum.showModelLayers', 'fulcrum.showOutput', 'fulcrum.restartEngine', 'fulcrum.toggleCompletions',
    'fulcrum.showPlan', 'fulcrum.showTimeline', 'fulcrum.explainDecision', 'fulcrum.whatIf', 'fulcrum.profileMachine', 'fulcrum.selectModel']) {
    assert.ok(commands.includes(c), `command ${c} is registered`);
  }
});

it('contributes its settings with defaults', async () => {
  const config = vscode.workspace.getConfiguration('fulcrum');
  assert.equal(config.inspect('completions.enabled')?.defaultValue, true);
  assert.equal(config.inspect('threads')?.defaultValue, 0);
  assert.equal(config.inspect('modelPath')?.defaultValue, '');
  assert.equal(config.inspect('plan.hardware')?.defaultValue, 'this');
  assert.equal(config.inspect('plan.policy')?.defaultValue, 'auto');
});

it('gives an inline completion from the engine after typing', async () => {
  const folder = vscode.workspace.workspaceFolders?.[0];
  assert.ok(folder, 'a workspace is open');
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.joinPath(folder.uri, 'story.txt'));
  const editor = await vscode.window.showTextDocument(doc);
  const end = doc.lineAt(doc.lineCount - 1).range.end;
  editor.selection = new vscode.Selection(end, end);
  // Retry while the engine loads the model: the provider returns nothing until it is ready.
  const text = await until(async () => {
    await vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
    await new Promise((r) => setTimeout(r, 1000));
    const before = doc.getText();
    await vscode.commands.executeCommand('editor.action.inlineSuggest.commit');
    const after = doc.getText();
    return after.length > before.length ? after.slice(before.length) : undefined;
  }, 'an accepted inline completion');
  assert.ok(text.trim().length > 0, `the engine completed the text: ${JSON.stringify(text)}`);
});

it('opens the plan, timeline and explanation panels for a preset model', async () => {
  const plan = vscode.workspace.getConfiguration('fulcrum.plan');
  await plan.update('model', 'llama-3.1-8b:Q4_K', vscode.ConfigurationTarget.Global);
  await plan.update('hardware', 'rtx4060-laptop-8gb+ryzen9-7950x', vscode.ConfigurationTarget.Global);
  for (const [command, title] of [['fulcrum.showPlan', 'Fulcrum: Offload Plan'], ['fulcrum.showTimeline', 'Fulcrum: Timeline'], ['fulcrum.explainDecision', 'Fulcrum: Explain Decision']]) {
    await vscode.commands.executeCommand(command!);
    const tab = await until(() => vscode.window.tabGroups.all.flatMap((g) => g.tabs).find((t) => t.label === title), `the ${title} tab`, 10_000);
    assert.ok(tab);
  }
});

it('opens the Model Layers panel', async () => {
  await vscode.commands.executeCommand('fulcrum.showModelLayers');
  const tab = await until(() => vscode.window.tabGroups.all.flatMap((g) => g.tabs).find((t) => t.label === 'Fulcrum: Model Layers'), 'the panel tab', 10_000);
  assert.ok(tab);
});

export async function run(): Promise<void> {
  const failures: string[] = [];
  for (const [name, fn] of tests) {
    try {
      await fn();
      console.log(`ok - ${name}`);
    } catch (err) {
      failures.push(name);
      console.log(`not ok - ${name}\n  ${err instanceof Error ? err.stack : String(err)}`);
    }
  }
  if (failures.length) throw new Error(`${failures.length} of ${tests.length} tests failed: ${failures.join('; ')}`);
}
