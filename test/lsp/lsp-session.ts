// A real LSP client for the tests: spawns the engine's server as a separate process speaking
// JSON-RPC over stdio, and records what the server sends on its own (progress, state, stats,
// log messages) so tests can assert on it.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import {
  CancellationTokenSource,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
  createMessageConnection,
  type MessageConnection,
} from 'vscode-languageserver-protocol/node';
import type { InitializeResult, InlineCompletionList, InlineCompletionParams } from 'vscode-languageserver-protocol';
import type { CompletionStats, FulcrumInitializationOptions, RemoteStatusParams, StateParams } from '../../engine/server/protocol';
import { repoRoot } from '../helpers/shared';

export interface ProgressEvent { token: string | number; value: { kind: string; percentage?: number; message?: string; title?: string } }

export class LspSession {
  readonly progress: ProgressEvent[] = [];
  readonly states: StateParams[] = [];
  readonly stats: CompletionStats[] = [];
  readonly remote: RemoteStatusParams[] = [];
  readonly logs: string[] = [];
  stderr = '';
  private exited = false;
  readonly exit: Promise<number | null>;

  private constructor(readonly child: ChildProcessWithoutNullStreams, readonly connection: MessageConnection) {
    this.exit = new Promise((resolve) => child.once('exit', (code) => { this.exited = true; resolve(code); }));
    child.stderr.on('data', (b: Buffer) => { this.stderr += b.toString(); });
    connection.onRequest('window/workDoneProgress/create', () => null);
    connection.onUnhandledProgress((p) => this.progress.push(p as ProgressEvent));
    connection.onNotification('fulcrum/state', (p: StateParams) => { this.states.push(p); });
    connection.onNotification('fulcrum/stats', (p: CompletionStats) => { this.stats.push(p); });
    connection.onNotification('fulcrum/remote', (p: RemoteStatusParams) => { this.remote.push(p); });
    connection.onNotification('window/logMessage', (p: { message: string }) => { this.logs.push(p.message); });
    connection.listen();
  }

  /**
   * Starts `node --import tsx engine/server/main.ts --stdio` (the sources, so the test needs no
   * bundle) or another command line that speaks LSP on stdio.
   */
  static start(args: string[] = ['--import', 'tsx', path.join(repoRoot, 'engine', 'server', 'main.ts'), '--stdio']): LspSession {
    const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] });
    const connection = createMessageConnection(new StreamMessageReader(child.stdout), new StreamMessageWriter(child.stdin));
    return new LspSession(child, connection);
  }

  async initialize(initializationOptions: FulcrumInitializationOptions = {}): Promise<InitializeResult> {
    const result = await this.connection.sendRequest<InitializeResult>('initialize', {
      processId: process.pid,
      rootUri: null,
      capabilities: { window: { workDoneProgress: true }, textDocument: { inlineCompletion: { dynamicRegistration: false } } },
      initializationOptions,
    });
    await this.connection.sendNotification('initialized', {});
    return result;
  }

  request<R>(method: string, params?: unknown, token?: CancellationTokenSource): Promise<R> {
    // vscode-jsonrpc takes a trailing argument as the token only when it is one; an undefined
    // would be sent as a second positional parameter.
    if (params === undefined) return token ? this.connection.sendRequest<R>(method, token.token) : this.connection.sendRequest<R>(method);
    return token ? this.connection.sendRequest<R>(method, params, token.token) : this.connection.sendRequest<R>(method, params);
  }

  openDocument(uri: string, text: string, languageId = 'plaintext'): void {
    void this.connection.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId, version: 1, text } });
  }

  inlineCompletion(uri: string, line: number, character: number, token?: CancellationTokenSource): Promise<InlineCompletionList> {
    const params: InlineCompletionParams = {
      textDocument: { uri },
      position: { line, character },
      context: { triggerKind: 2 /* Automatic */ },
    };
    return this.request<InlineCompletionList>('textDocument/inlineCompletion', params, token);
  }

  /** Waits until `predicate` holds, polling; fails with `what` after `timeoutMs`. */
  async waitFor(predicate: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (!predicate()) {
      if (this.exited) throw new Error(`server exited while waiting for ${what}\n${this.stderr}`);
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  get alive(): boolean {
    return !this.exited;
  }

  /** shutdown + exit, as an editor does; kills the process if it does not leave in time. */
  async stop(): Promise<number | null> {
    if (!this.exited) {
      try {
        await Promise.race([this.connection.sendRequest('shutdown'), new Promise((r) => setTimeout(r, 5000))]);
        void this.connection.sendNotification('exit');
      } catch { /* the process may already be gone */ }
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
      await this.exit;
      clearTimeout(timer);
    }
    this.connection.dispose();
    return this.exit;
  }
}

/** The error a request was rejected with (fails the test when it resolved). */
export async function rejection(promise: Promise<unknown>): Promise<ResponseError<unknown>> {
  try {
    const value = await promise;
    throw new Error(`expected an error response, got ${JSON.stringify(value)}`);
  } catch (err) {
    if (err instanceof ResponseError) return err;
    throw err;
  }
}

export { CancellationTokenSource };
