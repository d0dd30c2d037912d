// Wires the LSP server: capabilities, open-document tracking, the model host and every handler
// family. Transport-agnostic: main.ts (stdio / node IPC) and `fulcrum serve` pass a connection.
import { TextDocumentSyncKind, TextDocuments, type Connection, type InitializeResult } from 'vscode-languageserver';
import { TextDocument } from 'vscode-languageserver-textdocument';
import type { ServerContext, ServerOptions } from './context';
import { parseExecutionParams } from './execution-params';
import { handlerFamilies } from './handlers';
import { loadWithProgress } from './handlers/model';
import { DEFAULT_PROMPT_BUDGET } from '../completion/budget';
import { DEFAULT_MAX_TOKENS, DEFAULT_TIME_LIMIT_MS } from '../completion/completer';
import { ModelHost } from './model-host';
import { FulcrumNotifications, type FulcrumInitializationOptions, type StateParams } from './protocol';
import { parseCompletionOptions } from './completion-options';
import { invalidParams, optionalInteger, requireObject } from './validate';

export const SERVER_NAME = 'fulcrum';

export function startServer(connection: Connection): void {
  const documents = new TextDocuments(TextDocument);
  const host = new ModelHost({
    onStateChange: (state, modelPath, message) => {
      const params: StateParams = {
        state,
        ...(modelPath !== undefined ? { modelPath } : {}),
        ...(message !== undefined ? { message } : {}),
      };
      void connection.sendNotification(FulcrumNotifications.state, params);
    },
    onLog: (message) => connection.console.info(message),
    onFeedback: (p) => void connection.sendNotification(FulcrumNotifications.feedback, p),
  });
  const options: ServerOptions = {
    maxCompletionTokens: DEFAULT_MAX_TOKENS,
    promptBudget: DEFAULT_PROMPT_BUDGET,
    completionTimeLimitMs: DEFAULT_TIME_LIMIT_MS,
    showPartialAfterMs: 0,
    maxPromptMs: 0,
    completionCache: true,
    extraContext: false,
    exactPrompt: false,
    clientSupportsWorkDoneProgress: false,
  };
  const ctx: ServerContext = { connection, documents, host, options };

  connection.onInitialize((params): InitializeResult => {
    Object.assign(options, parseInitializationOptions(params.initializationOptions));
    options.clientSupportsWorkDoneProgress = params.capabilities.window?.workDoneProgress === true;
    return {
      capabilities: {
        textDocumentSync: TextDocumentSyncKind.Incremental,
        inlineCompletionProvider: true,
      },
      serverInfo: { name: SERVER_NAME, version: '0.1.0' },
    };
  });

  connection.onInitialized(() => {
    void connection.sendNotification(FulcrumNotifications.state, { state: host.state() } satisfies StateParams);
    if (options.modelPath !== undefined) {
      // Failures are already logged and reported as state 'error'; the server keeps serving.
      loadWithProgress(ctx, options.modelPath, options.threads).catch(() => undefined);
    }
  });

  connection.onShutdown(() => host.dispose());

  for (const register of handlerFamilies) register(ctx);
  documents.listen(connection);
  connection.listen();
}

function parseInitializationOptions(raw: unknown): Partial<ServerOptions> {
  if (raw === undefined || raw === null) return {};
  const method = 'initialize';
  const init = requireObject(method, raw, 'initializationOptions') as FulcrumInitializationOptions & Record<string, unknown>;
  const parsed: Partial<ServerOptions> = parseCompletionOptions(method, init, 'initializationOptions');
  if (init.modelPath !== undefined && init.modelPath !== null && init.modelPath !== '') {
    if (typeof init.modelPath !== 'string') throw invalidParams(method, 'initializationOptions.modelPath must be a string');
    parsed.modelPath = init.modelPath;
  }
  const threads = optionalInteger(method, init, 'threads', 1, 1024, 'initializationOptions.threads');
  if (threads !== undefined) parsed.threads = threads;
  const execution = parseExecutionParams(method, init, 'initializationOptions.');
  if (execution) parsed.execution = execution;
  return parsed;
}
