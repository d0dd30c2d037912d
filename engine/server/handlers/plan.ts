// fulcrum/plan, fulcrum/explain, fulcrum/simulate: the planner's request API
// (engine/plan/api.ts) over LSP. Params are the CLI's options in JSON form; `model` defaults to
// the loaded model's file and `hardware` to 'this' (the cached measured profile).
import { LSPErrorCodes, ResponseError } from 'vscode-languageserver';
import { explainRequest, planRequest, simulateRequest, type PlanParams, type SimulateParams } from '../../plan/api';
import type { ServerContext } from '../context';
import { FulcrumRequests } from '../protocol';
import { invalidParams, requireObject } from '../validate';

type StringOrObject = 'model' | 'hardware' | 'workload' | 'costs';

export function registerPlanHandlers(ctx: ServerContext): void {
  const { connection } = ctx;
  connection.onRequest(FulcrumRequests.plan, (raw: unknown) =>
    run(FulcrumRequests.plan, () => planRequest(planParams(ctx, FulcrumRequests.plan, raw))));
  connection.onRequest(FulcrumRequests.explain, (raw: unknown) =>
    run(FulcrumRequests.explain, () => explainRequest(planParams(ctx, FulcrumRequests.explain, raw))));
  connection.onRequest(FulcrumRequests.simulate, (raw: unknown) =>
    run(FulcrumRequests.simulate, () => {
      const params: SimulateParams = planParams(ctx, FulcrumRequests.simulate, raw);
      const trace = ((raw ?? {}) as Record<string, unknown>).trace;
      if (trace !== undefined && typeof trace !== 'boolean') throw invalidParams(FulcrumRequests.simulate, 'params.trace must be a boolean');
      if (trace !== undefined) params.trace = trace;
      return simulateRequest(params);
    }));
}

function planParams(ctx: ServerContext, method: string, raw: unknown): PlanParams {
  const params = requireObject(method, raw ?? {});
  const field = (name: StringOrObject): string | object | undefined => {
    const v = params[name];
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'string' ? v.length === 0 : typeof v !== 'object' || Array.isArray(v)) {
      throw invalidParams(method, `params.${name} must be a non-empty string or an object`);
    }
    return v;
  };
  const model = field('model') ?? ctx.host.info().summary?.path;
  if (model === undefined) throw invalidParams(method, 'params.model is required when no model is loaded (a GGUF path or a preset such as llama-3.1-8b:Q4_K)');
  const policy = params.policy;
  if (policy !== undefined && (typeof policy !== 'string' || policy.length === 0)) throw invalidParams(method, 'params.policy must be a policy name or "auto"');
  const out = { model, hardware: field('hardware') ?? 'this', workload: field('workload') ?? '' } as PlanParams;
  const costs = field('costs');
  if (costs !== undefined) out.costs = costs as PlanParams['costs'];
  if (policy !== undefined) out.policy = policy;
  return out;
}

/** The planner throws plain Errors naming what is wrong; they become RequestFailed responses. */
function run<T>(method: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof ResponseError) throw err;
    throw new ResponseError(LSPErrorCodes.RequestFailed, `${method}: ${err instanceof Error ? err.message : String(err)}`);
  }
}
