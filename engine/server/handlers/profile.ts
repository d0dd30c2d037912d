// fulcrum/profile: measures (or returns the cached) hardware profile of this machine with the
// native microbenchmarks (engine/profile/profiler.ts), reporting $/progress; $/cancelRequest
// stops it between runs. Decision: profiling does not wait for or stop completions; a completion
// that runs meanwhile disturbs the timings, as any other load on the machine would.
import { LSPErrorCodes, ResponseError, type CancellationToken, type WorkDoneProgressReporter } from 'vscode-languageserver';
import { ProfileAbortedError, getProfile } from '../../profile/profiler';
import type { ServerContext } from '../context';
import { FulcrumRequests } from '../protocol';
import { invalidParams, requireObject } from '../validate';

export function registerProfileHandlers(ctx: ServerContext): void {
  const { connection } = ctx;
  connection.onRequest(FulcrumRequests.profile, async (raw: unknown, token: CancellationToken) => {
    const method = FulcrumRequests.profile;
    const params = requireObject(method, raw ?? {});
    const flag = (name: string): boolean | undefined => {
      const v = params[name];
      if (v !== undefined && typeof v !== 'boolean') throw invalidParams(method, `params.${name} must be a boolean`);
      return v;
    };
    const quick = flag('quick') ?? false;
    const refresh = flag('refresh') ?? false;
    const workDoneToken = params.workDoneToken;
    let progress: WorkDoneProgressReporter | undefined;
    if (typeof workDoneToken === 'string' || typeof workDoneToken === 'number') progress = connection.window.attachWorkDoneProgress(workDoneToken);
    else if (ctx.options.clientSupportsWorkDoneProgress) progress = await connection.window.createWorkDoneProgress().catch(() => undefined);
    const abort = new AbortController();
    if (token.isCancellationRequested) abort.abort();
    const subscription = token.onCancellationRequested(() => abort.abort());
    progress?.begin('Fulcrum: profiling this machine', 0, quick ? 'quick profile' : 'full profile', false);
    try {
      return await getProfile({
        quick, refresh, signal: abort.signal,
        onProgress: (fraction, message) => progress?.report(Math.round(Math.min(1, Math.max(0, fraction)) * 100), message),
      });
    } catch (err) {
      if (err instanceof ProfileAbortedError || abort.signal.aborted) {
        throw new ResponseError(LSPErrorCodes.RequestCancelled, 'cancelled by the client ($/cancelRequest)');
      }
      throw new ResponseError(LSPErrorCodes.RequestFailed, `${method}: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      subscription.dispose();
      progress?.done();
    }
  });
}
