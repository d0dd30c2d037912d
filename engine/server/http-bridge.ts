// The HTTP API served from the editor's engine process: the same loaded model and the same
// scheduler as the editor's completions, so an editor, a chat panel and scripts share one model
// instead of each loading their own (model thrashing, as Continue's and Ollama's users report).
// When the model is swapped, the server moves to the new one on the same port and token (open
// streams of the old model end with it).
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { Engine } from '../runtime/engine';
import { PromptBuilder } from '../completion/prompt';
import { createHttpServer, modelAliasesOf } from './http/server';
import { ChatFormatter } from './http/chat';
import type { HttpServerInfo, StartHttpParams } from './protocol';

export class HttpBridge {
  private server: Server | undefined;
  private info: HttpServerInfo | undefined;

  running(): HttpServerInfo | undefined {
    return this.info;
  }

  /** Starts serving `engine` (or returns the running server). Rejects naming the port when it is taken. */
  async start(engine: Engine, params: StartHttpParams): Promise<HttpServerInfo> {
    if (this.info) return this.info;
    const token = params.token === null ? null : params.token ?? randomBytes(18).toString('base64url');
    const port = await this.listen(engine, params.port ?? 0, token);
    this.info = { url: `http://127.0.0.1:${port}`, port, token, model: engine.summary.name };
    return this.info;
  }

  /** The model changed: serve the new one on the same port and token, or stop when there is none. */
  async attach(engine: Engine | undefined): Promise<void> {
    if (!this.info) return;
    const { port, token } = this.info;
    await this.close();
    if (!engine) { this.info = undefined; return; }
    await this.listen(engine, port, token);
    this.info = { ...this.info, model: engine.summary.name };
  }

  async stop(): Promise<void> {
    await this.close();
    this.info = undefined;
  }

  private async listen(engine: Engine, port: number, token: string | null): Promise<number> {
    const { server } = createHttpServer({
      scheduler: engine.scheduler(), modelId: engine.summary.name, token: token ?? undefined,
      split: () => engine.execution.split, kvBytesInUse: () => engine.kvBytesInUse(),
      prompts: new PromptBuilder(engine.tokenizer), chat: new ChatFormatter(engine.tokenizer, engine.chatTemplate), contextLength: engine.contextLength,
      modelAliases: modelAliasesOf(engine.summary.path),
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e) => reject(new Error(`cannot serve HTTP on 127.0.0.1:${port}: ${(e as Error).message}`)));
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    const address = server.address();
    return typeof address === 'object' && address ? address.port : port;
  }

  private async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
