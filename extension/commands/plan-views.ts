// Commands that show the planner's answers: Show Offload Plan, Show Timeline, Explain Decision,
// What-If. Each opens its webview through the panel host and asks the engine (the planner runs
// on the engine's worker thread, so completions are not held up).
import { writeFile } from 'node:fs/promises';
import * as vscode from 'vscode';
import { CancellationTokenSource, LSPErrorCodes, ResponseError, type LanguageClient } from 'vscode-languageclient/node';
import {
  FulcrumRequests, type ChromeTrace, type ExportPlanParams, type LlamaCppExport, type MeasureResult, type PlanViewData, type PresetsResult, type TimelineViewData,
} from '../../engine/server/protocol';
import type { Plan } from '../../engine/server/protocol';
import type { WhatIfSettings, WhatIfViewData } from '../../webviews/whatif/types';
import { showPanel } from '../panels/panel-host';
import { planInputs, requestExplain, requestPlan, requestSimulate, requireClient } from '../planner';
import { isPresetModel, whatIfInputs } from '../whatif-params';

export interface PlanViewsContext {
  extensionUri: vscode.Uri;
  log: vscode.LogOutputChannel;
  client(): LanguageClient | undefined;
  /** The model file the engine has loaded, if any. */
  loadedModel(): string | undefined;
}

export function registerPlanViews(ctx: PlanViewsContext): vscode.Disposable[] {
  const inputs = () => planInputs(ctx.loadedModel());
  const showPlan = () => {
    const panelInputs = inputs();
    showPanel<PlanViewData>(ctx.extensionUri, {
      view: 'plan',
      load: async () => {
        const plan = await requestPlan(requireClient(ctx.client()), panelInputs);
        // Measured per-op times come from the runtime executing the plan; until it reports
        // them the panel shows predictions only (no `measured` field).
        return { plan };
      },
      actions: {
        copyLlamaCpp: async () => {
          const plan = await requestPlan(requireClient(ctx.client()), panelInputs);
          const params: ExportPlanParams = { plan, format: 'llama.cpp' };
          const exported = await requireClient(ctx.client()).sendRequest<LlamaCppExport>(FulcrumRequests.exportPlan, params);
          await vscode.env.clipboard.writeText(exported.commandLine);
          const rest = exported.unsupported.length ? ` Not expressible: ${exported.unsupported.join('; ')}` : ' They express the whole placement.';
          void vscode.window.showInformationMessage(`Fulcrum: copied llama.cpp flags: ${exported.commandLine}.${rest}`);
        },
        showTimeline: () => vscode.commands.executeCommand('fulcrum.showTimeline'),
        explain: () => vscode.commands.executeCommand('fulcrum.explainDecision'),
        whatIf: () => vscode.commands.executeCommand('fulcrum.whatIf'),
      },
    }, ctx.log);
  };

  const showTimeline = () => {
    const panelInputs = inputs();
    let trace: ChromeTrace | undefined;
    showPanel<TimelineViewData>(ctx.extensionUri, {
      view: 'timeline',
      load: async () => {
        const result = await requestSimulate(requireClient(ctx.client()), panelInputs);
        if (!result.trace) throw new Error('fulcrum/simulate returned no trace');
        trace = result.trace;
        return { predicted: result.trace, title: `${result.plan.model.name}, ${result.plan.chosenPolicy} on ${result.plan.hardware.name}` };
      },
      actions: {
        exportTrace: async () => {
          if (!trace) throw new Error('no trace to export yet');
          const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
          const target = await vscode.window.showSaveDialog({
            title: 'Export the trace for Perfetto (ui.perfetto.dev) or chrome://tracing',
            filters: { 'Chrome trace JSON': ['json'] },
            ...(folder ? { defaultUri: vscode.Uri.joinPath(folder, 'fulcrum-trace.json') } : {}),
          });
          if (!target) return;
          await writeFile(target.fsPath, JSON.stringify(trace));
          void vscode.window.showInformationMessage(`Fulcrum: trace written to ${target.fsPath}`);
        },
      },
    }, ctx.log);
  };

  const explain = () => {
    const panelInputs = inputs();
    showPanel<Plan>(ctx.extensionUri, { view: 'explain', load: () => requestExplain(requireClient(ctx.client()), panelInputs) }, ctx.log);
  };

  const whatIf = () => {
    const base = inputs();
    let running: CancellationTokenSource | undefined;
    let view: WhatIfViewData | undefined;
    const modelIsPreset = base.model !== undefined && isPresetModel(base.model);
    showPanel<WhatIfViewData>(ctx.extensionUri, {
      view: 'whatif',
      retainContextWhenHidden: true,
      load: async () => {
        const client = requireClient(ctx.client());
        const [presets, baseline] = await Promise.all([
          client.sendRequest<PresetsResult>(FulcrumRequests.presets),
          requestExplain(client, base),
        ]);
        const w = baseline.workload;
        const baselineSettings: WhatIfSettings = {
          vramGiB: w.vramBytes !== undefined ? w.vramBytes / 2 ** 30 : null, prompt: w.prompt, gen: w.gen, batch: w.batch,
          format: null, gpu: null,
        };
        view = {
          session: `${Date.now()}`, presets, modelLabel: baseline.model.name, modelIsPreset, hardware: base.hardware,
          baseline, baselineSettings,
        };
        return view;
      },
      actions: {
        replan: async (args, panel) => {
          if (!view) return;
          const requestId = Number(args?.requestId);
          const settings = args?.settings as WhatIfSettings;
          // The newest slider position wins: cancel the older request here, and the engine
          // cancels any older 'what-if' job still queued or running (supersedes).
          running?.cancel();
          const source = new CancellationTokenSource();
          running = source;
          const next = whatIfInputs(base, settings, modelIsPreset);
          try {
            const plan = await requestExplain(requireClient(ctx.client()), next, { supersedes: 'what-if' }, source.token);
            if (source.token.isCancellationRequested) return;
            await panel.show({ ...view, current: { requestId, plan, settings, hardware: next.hardware } });
          } catch (err) {
            if (err instanceof ResponseError && err.code === LSPErrorCodes.RequestCancelled) return;
            if (source.token.isCancellationRequested) return;
            await panel.show({ ...view, error: { requestId, message: err instanceof Error ? err.message : String(err) } });
          }
        },
      },
    }, ctx.log);
  };

  // Measured next to predicted: the engine runs the loaded model for a few traced steps
  // (fulcrum/measure) and the plan and timeline panels show the plan of what runs with the
  // measured times beside its predictions.
  const measure = async () => {
    const client = requireClient(ctx.client());
    const result = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Fulcrum: measuring the running model' },
      () => client.sendRequest<MeasureResult>(FulcrumRequests.measure, {}));
    ctx.log.info(`measured decode step ${result.decodeStepMs.toFixed(3)} ms, predicted ${result.predictedStepMs.toFixed(3)} ms (${result.plan.chosenPolicy})`);
    const title = `${result.plan.model.name}, ${result.plan.chosenPolicy} on ${result.plan.hardware.name}: measured`;
    showPanel<PlanViewData>(ctx.extensionUri, {
      view: 'plan',
      load: async () => ({ plan: result.plan, measured: result.measured }),
      actions: {
        showTimeline: () => {
          showPanel<TimelineViewData>(ctx.extensionUri, {
            view: 'timeline',
            load: async () => ({ predicted: result.predictedTrace as ChromeTrace, measured: result.measuredTrace as ChromeTrace, title }),
            actions: {
              exportTrace: async () => {
                const target = await vscode.window.showSaveDialog({ title: 'Export the measured trace for Perfetto', filters: { 'Chrome trace JSON': ['json'] } });
                if (!target) return;
                await writeFile(target.fsPath, JSON.stringify(result.measuredTrace));
              },
            },
          }, ctx.log);
        },
        explain: () => vscode.commands.executeCommand('fulcrum.explainDecision'),
        whatIf: () => vscode.commands.executeCommand('fulcrum.whatIf'),
      },
    }, ctx.log);
  };

  return [
    vscode.commands.registerCommand('fulcrum.measureRun', measure),
    vscode.commands.registerCommand('fulcrum.showPlan', showPlan),
    vscode.commands.registerCommand('fulcrum.showTimeline', showTimeline),
    vscode.commands.registerCommand('fulcrum.explainDecision', explain),
    vscode.commands.registerCommand('fulcrum.whatIf', whatIf),
  ];
}
