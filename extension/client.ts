// Starts the engine (dist/server.js, forked with node IPC) behind a vscode-languageclient
// LanguageClient, and restarts it with back-off when it exits unexpectedly.
import path from 'node:path';
import * as vscode from 'vscode';
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  RevealOutputChannelOn,
  TransportKind,
  type CloseHandlerResult,
  type DocumentSelector,
  type ErrorHandlerResult,
  type LanguageClientOptions,
  type ServerOptions,
} from 'vscode-languageclient/node';
import type { CompletionOptionsParams, FulcrumInitializationOptions } from '../engine/server/protocol';
import { RestartPolicy } from './restart-policy';
import { readSettings, type FulcrumSettings } from './settings';

/**
 * Every kind of document a user edits text in, in any language: local and remote files,
 * untitled buffers, notebook cells, virtual file systems. Not `{ scheme: '*' }`: that would
 * also sync output channels (our own log included) and other read-only views to the engine.
 */
export const DOCUMENT_SELECTOR: DocumentSelector = [
  { scheme: 'file' },
  { scheme: 'untitled' },
  { scheme: 'vscode-notebook-cell' },
  { scheme: 'vscode-remote' },
  { scheme: 'vscode-vfs' },
  { scheme: 'vscode-userdata' },
];

export interface ClientHooks {
  /** Whether an inline completion should be asked for now (setting on, engine ready). */
  completionsWanted(): boolean;
  /** Called before each automatic restart, and when restarts are given up. */
  onRestart(attempt: number, delayMs: number): void;
  onGiveUp(crashes: number): void;
}


export function createClient(extensionPath: string, output: vscode.LogOutputChannel, policy: RestartPolicy,
  hooks: ClientHooks): LanguageClient {
  const module = path.join(extensionPath, 'dist', 'server.js');
  const serverOptions: ServerOptions = {
    run: { module, transport: TransportKind.ipc },
    debug: { module, transport: TransportKind.ipc, options: { execArgv: ['--enable-source-maps'] } },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENT_SELECTOR,
    outputChannel: output,
    // The library's own errors go to Output › Fulcrum only, never to a toast: after the restart
    // policy gave up, every edit or save of an open document failed with "Sending document
    // notification … failed … Connection is disposed" next to Fulcrum's own message, which
    // already says what happened. Fulcrum raises its own toasts (give-up, engine error); the
    // library still forces its toast where the connection cannot be made at all.
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    // A function, so every (re)start sends the current settings.
    initializationOptions: (): FulcrumInitializationOptions => {
      const settings = readSettings();
      return {
        ...(settings.modelPath !== undefined ? { modelPath: settings.modelPath } : {}),
        ...(settings.threads !== undefined ? { threads: settings.threads } : {}),
        device: settings.device, policy: settings.policy, kvFormat: settings.kvFormat, ...(settings.vram ? { vram: settings.vram } : {}),
        ...completionOptions(settings),
      };
    },
    errorHandler: {
      error: (): ErrorHandlerResult => ({ action: ErrorAction.Continue, handled: false }),
      closed: async (): Promise<CloseHandlerResult> => {
        const decision = policy.onCrash(Date.now());
        if (!decision.restart) {
          hooks.onGiveUp(decision.crashes);
          return {
            action: CloseAction.DoNotRestart,
            handled: true,
            message: `Fulcrum engine exited ${decision.crashes} times within ${policy.windowMs / 60_000} minutes; not restarting it.`,
          };
        }
        hooks.onRestart(decision.attempt, decision.delayMs);
        // The client awaits this handler, so waiting here is the back-off.
        await new Promise((resolve) => setTimeout(resolve, decision.delayMs));
        return { action: CloseAction.Restart, handled: true, message: `Fulcrum engine exited; restarting it (attempt ${decision.attempt}).` };
      },
    },
    middleware: {
      provideInlineCompletionItems: async (document, position, context, token, next) => {
        if (!hooks.completionsWanted()) return null;
        // A burst of keystrokes sends one request (fulcrum.completions.debounceMs).
        await new Promise((resolve) => setTimeout(resolve, readSettings().debounceMs));
        if (token.isCancellationRequested || !hooks.completionsWanted()) return null;
        return next(document, position, context, token);
      },
    },
  };
  return new LanguageClient('fulcrum', 'Fulcrum', serverOptions, clientOptions);
}

/** The completion settings as the engine takes them (initializationOptions and fulcrum/completionOptions). */
export function completionOptions(settings: FulcrumSettings): CompletionOptionsParams {
  return {
    promptBudget: settings.promptBudget,
    maxCompletionTokens: settings.maxTokens,
    completionTimeLimitMs: settings.timeLimitMs,
    showPartialAfterMs: settings.showPartialAfterMs,
    maxPromptMs: settings.maxPromptMs,
    extraContext: settings.extraContext,
    exactPrompt: settings.exactPrompt,
    // '' turns a previously set endpoint off in the engine.
    completionEndpoint: settings.endpoint ?? '',
    completionEndpointKind: settings.endpointKind,
    ...(settings.endpointToken ? { completionEndpointToken: settings.endpointToken } : {}),
  };
}
