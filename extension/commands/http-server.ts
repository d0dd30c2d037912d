// Fulcrum: Start HTTP Server / Stop HTTP Server. The engine serves the loaded model over an
// OpenAI-compatible HTTP API on 127.0.0.1 from its own process (fulcrum/startHttp), through the
// scheduler the editor's completions use: scripts and other tools share the one loaded model.
// With fulcrum.http.enabled it starts by itself whenever a model is ready.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { FulcrumRequests, type HttpServerInfo, type StartHttpParams } from '../../engine/server/protocol';
import { requireClient } from '../planner';

export function httpSettings(): StartHttpParams {
  const config = vscode.workspace.getConfiguration('fulcrum');
  return { port: config.get<number>('http.port', 8080), ...(config.get<boolean>('http.requireToken', true) ? {} : { token: null }) };
}

export async function startHttpServer(client: LanguageClient, log: vscode.LogOutputChannel, announce: boolean): Promise<HttpServerInfo> {
  const info = await client.sendRequest<HttpServerInfo>(FulcrumRequests.startHttp, httpSettings());
  log.info(`HTTP API: ${info.url} (model ${info.model})${info.token ? ', bearer token in the notification' : ', no authentication'}`);
  if (announce) {
    const actions = info.token ? ['Copy Token', 'Copy URL'] : ['Copy URL'];
    void vscode.window.showInformationMessage(`Fulcrum serves ${info.model} at ${info.url}/v1/completions`, ...actions).then(async (choice) => {
      if (choice === 'Copy Token' && info.token) await vscode.env.clipboard.writeText(info.token);
      if (choice === 'Copy URL') await vscode.env.clipboard.writeText(info.url);
    });
  }
  return info;
}

export function registerHttpCommands(client: () => LanguageClient | undefined, log: vscode.LogOutputChannel): vscode.Disposable[] {
  return [
    vscode.commands.registerCommand('fulcrum.startHttpServer', async () => {
      try {
        return await startHttpServer(requireClient(client()), log, true);
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        void vscode.window.showErrorMessage(`Fulcrum: the HTTP API did not start: ${message}`);
        return undefined;
      }
    }),
    vscode.commands.registerCommand('fulcrum.stopHttpServer', async () => {
      await requireClient(client()).sendRequest(FulcrumRequests.stopHttp);
      log.info('HTTP API stopped');
    }),
  ];
}
