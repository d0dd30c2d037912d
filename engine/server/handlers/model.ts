// fulcrum/loadModel, fulcrum/modelInfo, fulcrum/layers, fulcrum/measure: the model's lifecycle,
// contents and measured run.
import type { CancellationToken, WorkDoneProgressReporter } from 'vscode-languageserver';
import type { ServerContext, ServerOptions } from '../context';
import { parseExecutionParams } from '../execution-params';
import { FulcrumRequests, type LayersResult, type MeasureResult, type ModelInfo } from '../protocol';
import { optionalInteger, requireObject, requireString } from '../validate';
import type { ModelSummary } from '../../runtime/types';

const MAX_THREADS = 1024;

export function registerModelHandlers(ctx: ServerContext): void {
  const { connection, host } = ctx;

  connection.onRequest(FulcrumRequests.loadModel, async (raw: unknown): Promise<ModelSummary> => {
    const method = FulcrumRequests.loadModel;
    const params = requireObject(method, raw);
    const path = requireString(method, params, 'path');
    const threads = optionalInteger(method, params, 'threads', 1, MAX_THREADS) ?? ctx.options.threads;
    const token = params.workDoneToken;
    const reporter = typeof token === 'string' || typeof token === 'number'
      ? connection.window.attachWorkDoneProgress(token)
      : undefined;
    const execution = parseExecutionParams(method, params) ?? ctx.options.execution;
    return loadWithProgress(ctx, path, threads, reporter, execution);
  });

  // Answers at once in every state, also while a model loads or a completion runs.
  connection.onRequest(FulcrumRequests.modelInfo, (): ModelInfo => host.info());

  connection.onRequest(FulcrumRequests.layers, (): LayersResult => ({ model: host.summary(), layers: host.layers() }));
}

/**
 * Loads a model and reports `$/progress` on `reporter`, or on a progress the server creates
 * when the client supports that (the initialization-time load has no request token).
 */
export async function loadWithProgress(ctx: ServerContext, path: string, threads: number | undefined,
  reporter?: WorkDoneProgressReporter, execution: ServerOptions['execution'] = ctx.options.execution): Promise<ModelSummary> {
  const progress = reporter ?? (ctx.options.clientSupportsWorkDoneProgress
    ? await ctx.connection.window.createWorkDoneProgress().catch(() => undefined)
    : undefined);
  progress?.begin('Fulcrum: loading model', 0, path, false);
  ctx.connection.console.info(`loading model ${path}${threads !== undefined ? ` with ${threads} threads` : ''}`);
  const started = Date.now();
  try {
    const summary = await ctx.host.load({
      path,
      ...(threads !== undefined ? { threads } : {}),
      ...(execution ? { execution } : {}),
      onProgress: (fraction, message) => progress?.report(Math.round(Math.min(1, Math.max(0, fraction)) * 100), message),
    });
    ctx.connection.console.info(`loaded ${summary.name} (${summary.architecture}, ${summary.nLayers} layers, ` +
      `${summary.parameters} parameters) in ${Date.now() - started} ms`);
    const ex = ctx.host.info().execution;
    if (ex) {
      ctx.connection.console.info(`executing on ${ex.device} with policy ${ex.policy}: ${ex.split}${ex.fallback ? ` (fell back to the CPU: ${ex.fallback})` : ''}`);
      for (const n of ex.notes) ctx.connection.console.info(`  ${n}`);
    }
    return summary;
  } catch (err) {
    ctx.connection.console.error(err instanceof Error ? err.message : String(err));
    throw err;
  } finally {
    progress?.done();
  }
}

export function registerMeasureHandler(ctx: ServerContext): void {
  ctx.connection.onRequest(FulcrumRequests.measure, async (raw: unknown, token: CancellationToken): Promise<MeasureResult> => {
    const method = FulcrumRequests.measure;
    const o = raw === undefined || raw === null ? {} : requireObject(method, raw);
    const promptTokens = optionalInteger(method, o, 'promptTokens', 1, 4096);
    const decodeSteps = optionalInteger(method, o, 'decodeSteps', 1, 256);
    const ac = new AbortController();
    token.onCancellationRequested(() => ac.abort());
    return ctx.host.measure({ ...(promptTokens !== undefined ? { promptTokens } : {}), ...(decodeSteps !== undefined ? { decodeSteps } : {}) }, ac.signal);
  });
}
