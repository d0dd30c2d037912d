// fulcrum/startHttp and fulcrum/stopHttp: the loaded model served over HTTP from this process
// (engine/server/http-bridge.ts), next to the editor's completions.
import { ResponseError } from 'vscode-languageserver';
import type { ServerContext } from '../context';
import { HttpBridge } from '../http-bridge';
import { FulcrumErrorCodes, FulcrumRequests, type HttpServerInfo, type StartHttpParams } from '../protocol';
import { invalidParams, optionalInteger, requireObject } from '../validate';

export function registerHttpHandlers(ctx: ServerContext): void {
  const bridge = new HttpBridge();
  ctx.host.onEngineChanged((engine) => bridge.attach(engine));
  ctx.connection.onRequest(FulcrumRequests.startHttp, async (raw: unknown): Promise<HttpServerInfo> => {
    const method = FulcrumRequests.startHttp;
    const o = raw === undefined || raw === null ? {} : requireObject(method, raw);
    const port = optionalInteger(method, o, 'port', 0, 65535);
    if (o.token !== undefined && o.token !== null && (typeof o.token !== 'string' || o.token.length < 8 || /\s/.test(o.token))) {
      throw invalidParams(method, "token must be a string of at least 8 characters without spaces, or null for no authentication");
    }
    const engine = ctx.host.servingEngine();
    if (!engine) throw new ResponseError(FulcrumErrorCodes.NoModel, 'no model is loaded: set fulcrum.modelPath (or run Fulcrum: Select Model) first');
    const params: StartHttpParams = { ...(port !== undefined ? { port } : {}), ...(o.token !== undefined ? { token: o.token as string | null } : {}) };
    try {
      return await bridge.start(engine, params);
    } catch (e) {
      throw new ResponseError(FulcrumErrorCodes.HttpFailed, (e as Error).message);
    }
  });
  ctx.connection.onRequest(FulcrumRequests.stopHttp, async (): Promise<null> => {
    await bridge.stop();
    return null;
  });
}
