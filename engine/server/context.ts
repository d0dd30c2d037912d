import type { RemoteEndpointConfig } from '../completion/remote/client';
// What every request handler gets: the connection, the open documents, the model host and the
// options the client sent in `initialize`.
import type { Connection, TextDocuments } from 'vscode-languageserver';
import type { TextDocument } from 'vscode-languageserver-textdocument';
import type { KvFormat } from '../runtime/types';
import type { ModelHost } from './model-host';

export interface ServerOptions {
  modelPath?: string;
  threads?: number;
  maxCompletionTokens: number;
  /** Where and how models execute (initializationOptions device / vram / policy / kvFormat). */
  execution?: { device?: 'auto' | 'cpu' | 'loopback' | 'vulkan'; vramBytes?: number; policy?: string; kvFormat?: KvFormat };
  promptBudget: number;
  /** 0: no cap. */
  completionTimeLimitMs: number;
  /** Show the text so far of a completion still decoding after this many ms; 0 = off. */
  showPartialAfterMs: number;
  /** Cut a prompt whose uncached tokens would take longer than this many ms; 0 = off. */
  maxPromptMs: number;
  completionCache: boolean;
  /** Put chunks of recently used other documents before the prompt. */
  extraContext: boolean;
  /** Evaluate every prompt token (no shifted reuse of the suffix's KV). */
  exactPrompt: boolean;
  /** Completions go to this remote endpoint first (fallback: the local model when loaded); '' url = off. */
  remote?: RemoteEndpointConfig;
  /** The client accepts server-created work-done progress (window/workDoneProgress/create). */
  clientSupportsWorkDoneProgress: boolean;
}

export interface ServerContext {
  connection: Connection;
  documents: TextDocuments<TextDocument>;
  host: ModelHost;
  options: ServerOptions;
}

/** A module that registers the handlers of one request family (fulcrum/*, inline completion…). */
export type HandlerFamily = (ctx: ServerContext) => void;
