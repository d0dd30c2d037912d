// fulcrum/plan, fulcrum/explain, fulcrum/simulate: the planner's request API
// (engine/plan/api.ts) over LSP. Params are the CLI's options in JSON form; `model` defaults to
// the loaded model's file and `hardware` to 'this' (the cached measured profile). The planning
// itself runs on a worker thread (planner/pool.ts), so completions never wait behind it;
// $/cancelRequest stops a job, and `supersedes: 'what-if'` cancels the older job of that group.
import { LSPErrorCodes, ResponseError, type CancellationToken } from 'vscode-languageserver';
import { resolveModel, type PlanParams, type SimulateParams } from '../../plan/api';
import type { ServerContext } from '../context';
import { GPU_PRESETS, MACHINE_PRESETS } from '../../hardware/presets';
import { MODEL_PRESET_DEFS } from '../../model/model-presets';
import { exportLlamaCpp } from '../../plan/export-llamacpp';
import type { Plan } from '../../plan/types';
import { PlannerCancelledError, PlannerPool } from '../planner/pool';
import type { PlannerMethod } from '../planner/messages';
import { FulcrumRequests, type PresetsResult } from '../protocol';
import { invalidParams, requireObject } from '../validate';

type StringOrObject = 'model' | 'hardware' | 'workload' | 'costs';

export function registerPlanHandlers(ctx: ServerContext): void {
  const { connection } = ctx;
  const pool = new PlannerPool();
  const handle = (method: string, kind: PlannerMethod) => (raw: unknown, token: CancellationToken | undefined) => {
    const params: SimulateParams = planParams(ctx, method, raw);
    const extra = (raw ?? {}) as Record<string, unknown>;
    if (kind === 'simulate') {
      const trace = extra.trace;
      if (trace !== undefined && typeof trace !== 'boolean') throw invalidParams(method, 'params.trace must be a boolean');
      if (trace !== undefined) params.trace = trace;
    }
    const supersedes = extra.supersedes;
    if (supersedes !== undefined && (typeof supersedes !== 'string' || supersedes.length === 0)) throw invalidParams(method, 'params.supersedes must be a non-empty string');
    return run(method, pool.run(kind, params, {
      ...(supersedes !== undefined ? { supersedes } : {}),
      // A client that sends extra positional params leaves no token here; then there is nothing to cancel.
      onCancel: (cancel) => { token?.onCancellationRequested?.(cancel); },
    }));
  };
  connection.onRequest(FulcrumRequests.plan, handle(FulcrumRequests.plan, 'plan'));
  connection.onRequest(FulcrumRequests.explain, handle(FulcrumRequests.explain, 'explain'));
  connection.onRequest(FulcrumRequests.simulate, handle(FulcrumRequests.simulate, 'simulate'));
  connection.onRequest(FulcrumRequests.presets, (): PresetsResult => ({
    gpus: GPU_PRESETS.map((g) => ({ key: g.key, name: g.gpu.name, memoryBytes: g.gpu.memoryBytes })),
    machines: MACHINE_PRESETS.map((m) => m.key),
    models: MODEL_PRESET_DEFS.map((m) => m.key),
    // The block formats the cost model has sizes for and llama.cpp users pick most.
    formats: ['F16', 'Q8_0', 'Q6_K', 'Q5_K', 'Q4_K', 'Q4_0'],
  }));
  connection.onRequest(FulcrumRequests.exportPlan, (raw: unknown) => {
    const method = FulcrumRequests.exportPlan;
    const params = requireObject(method, raw);
    if (params.format !== 'llama.cpp') throw invalidParams(method, `params.format must be 'llama.cpp'`);
    const plan = params.plan as Plan | undefined;
    if (!plan || typeof plan !== 'object' || !plan.stages?.decode?.layers) throw invalidParams(method, 'params.plan must be a plan (the result of fulcrum/plan)');
    return exportLlamaCpp(plan);
  });
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
  // The loaded model is planned with the KV cache format it runs with (fulcrum.execution.kvFormat).
  const loaded = ctx.host.info().summary;
  const model = field('model') ?? (loaded ? { ...resolveModel(loaded.path), kvFormat: loaded.kvFormat } : undefined);
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
async function run<T>(method: string, job: Promise<T>): Promise<T> {
  try {
    return await job;
  } catch (err) {
    if (err instanceof ResponseError) throw err;
    if (err instanceof PlannerCancelledError) throw new ResponseError(LSPErrorCodes.RequestCancelled, `${method}: ${err.message}`);
    throw new ResponseError(LSPErrorCodes.RequestFailed, `${method}: ${err instanceof Error ? err.message : String(err)}`);
  }
}
