// The extension's side of the planner requests: params from the settings (fulcrum.plan.*), the
// requests themselves, and readable errors.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { FulcrumRequests, type Plan, type PlannerRequestExtras, type PlanParams, type SimulateResult } from '../engine/server/protocol';
import { readSettings } from './settings';

export interface PlanInputs { model?: string; hardware: string; workload: string; policy: string }

/** Model: fulcrum.plan.model, else the engine's loaded model (sent as undefined), else fulcrum.modelPath. */
export function planInputs(loadedModel: string | undefined): PlanInputs {
  const config = vscode.workspace.getConfiguration('fulcrum.plan');
  const override = config.get<string>('model', '').trim();
  const model = override || loadedModel || readSettings().modelPath;
  return {
    ...(model ? { model } : {}),
    hardware: config.get<string>('hardware', 'this').trim() || 'this',
    workload: config.get<string>('workload', 'batch=1,prompt=2048,gen=64').trim(),
    policy: config.get<string>('policy', 'auto').trim() || 'auto',
  };
}

export function requireClient(client: LanguageClient | undefined): LanguageClient {
  if (!client || !client.isRunning()) throw new Error('the Fulcrum engine is not running; see Output › Fulcrum');
  return client;
}

function params(inputs: PlanInputs): Partial<PlanParams> {
  if (!inputs.model) throw new Error('no model to plan: select a model (Fulcrum: Select Model) or set fulcrum.plan.model to a preset such as llama-3.1-8b:Q4_K');
  return { model: inputs.model, hardware: inputs.hardware, workload: inputs.workload, policy: inputs.policy };
}

/**
 * Sends with a token only when there is one: vscode-jsonrpc would send an `undefined` third
 * argument as a second positional parameter.
 */
function send<R>(client: LanguageClient, method: string, body: object, token: vscode.CancellationToken | undefined): Promise<R> {
  return token ? client.sendRequest<R>(method, body, token) : client.sendRequest<R>(method, body);
}

export function requestPlan(client: LanguageClient, inputs: PlanInputs, token?: vscode.CancellationToken): Promise<Plan> {
  return send<Plan>(client, FulcrumRequests.plan, params(inputs), token);
}

export function requestExplain(client: LanguageClient, inputs: PlanInputs, extras: PlannerRequestExtras = {}, token?: vscode.CancellationToken): Promise<Plan> {
  return send<Plan>(client, FulcrumRequests.explain, { ...params(inputs), ...extras }, token);
}

export function requestSimulate(client: LanguageClient, inputs: PlanInputs, token?: vscode.CancellationToken): Promise<SimulateResult> {
  return send<SimulateResult>(client, FulcrumRequests.simulate, { ...params(inputs), trace: true }, token);
}
