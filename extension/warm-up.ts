// Cache warm-up on focus (issue 23 item 2): when an editor gets focus (or the model becomes
// ready), the engine is told where its cursor is (fulcrum/warmCompletion) and evaluates the
// prompt a completion there would have, so the first completion evaluates only what changed
// since, as llama.vscode warms llama-server's cache. While local completions are wanted.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { FulcrumNotifications, type WarmCompletionParams } from '../engine/server/protocol';

export function warmActiveEditor(client: LanguageClient | undefined, wanted: () => boolean, editor = vscode.window.activeTextEditor): void {
  if (!client?.isRunning() || !editor || !wanted()) return;
  // A document outside the client's selector (an output channel) is not the engine's: it ignores it.
  const { line, character } = editor.selection.active;
  const params: WarmCompletionParams = { textDocument: { uri: editor.document.uri.toString() }, position: { line, character } };
  void client.sendNotification(FulcrumNotifications.warmCompletion, params);
}

/** Warms the cache whenever another editor gets focus. */
export function registerWarmUp(client: () => LanguageClient | undefined, wanted: () => boolean): vscode.Disposable {
  return vscode.window.onDidChangeActiveTextEditor((editor) => warmActiveEditor(client(), wanted, editor));
}
