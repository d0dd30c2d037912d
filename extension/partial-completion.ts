// Show what we have (fulcrum.completions.showPartialAfterMs): the engine answers a completion
// still decoding at the deadline with the text so far, and tells us (fulcrum/completionExtended)
// when the full text is ready. If the cursor has not moved, asking VS Code to show the inline
// suggestion again gets the full text from the engine's completion cache at once.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { FulcrumNotifications, type CompletionExtendedParams } from '../engine/server/protocol';

/** True when `editor` still shows the document version and cursor the partial completion was for. */
export function cursorUnmoved(editor: vscode.TextEditor | undefined, uri: string, p: CompletionExtendedParams): boolean {
  if (!editor || editor.document.uri.toString() !== uri || editor.document.version !== p.textDocument.version) return false;
  const { selection } = editor;
  return selection.isEmpty && selection.active.line === p.position.line && selection.active.character === p.position.character;
}

export function registerPartialCompletions(client: LanguageClient, log: vscode.LogOutputChannel): vscode.Disposable {
  return client.onNotification(FulcrumNotifications.completionExtended, (p: CompletionExtendedParams) => {
    const uri = client.protocol2CodeConverter.asUri(p.textDocument.uri).toString();
    if (!cursorUnmoved(vscode.window.activeTextEditor, uri, p)) return;
    log.info(`completion: the full suggestion is ready (${p.length} characters; ${p.partialLength} were shown early)`);
    void vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
  });
}
