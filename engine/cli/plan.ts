// `fulcrum plan`: plan the CPU/GPU split of a model for a machine and workload.
// `--export llama.cpp|vllm|ollama` prints the engine's command (or Modelfile) reproducing the plan
// instead. A cluster --hardware (N hosts @ network) plans a pipeline over hosts (engine/plan/multihost).

import { UsageError, type CliCommand } from './command';
import { formatPlan, parsePlanArgs, planUsage } from './plan-format';
import { planRequest, resolveHardware, resolveModel } from '../plan/api';
import { exportLlamaCpp, formatLlamaCppExport } from '../plan/export-llamacpp';
import { exportLlamaCppCluster, exportOllamaCluster, exportOllamaSingle, exportVllmCluster, exportVllmSingle, formatEngineExport } from '../plan/multihost/export';
import { formatClusterPlan } from '../plan/multihost/pipeline';
import { clusterRequest, isClusterHardware } from '../plan/multihost/request';

const EXPORT_FORMATS = ['llama.cpp', 'vllm', 'ollama'];

/** Takes `--export FORMAT` / `--export=FORMAT` out of argv (only `plan` has it). */
function takeExport(argv: string[]): { rest: string[]; format: string | undefined } {
  const rest: string[] = [];
  let format: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--export' || a.startsWith('--export=')) {
      const value = a === '--export' ? argv[++i] : a.slice('--export='.length);
      if (value === undefined || value === '') throw new UsageError(`--export needs a format (${EXPORT_FORMATS.join(', ')})`);
      if (!EXPORT_FORMATS.includes(value)) throw new UsageError(`--export: unknown format '${value}' (known: ${EXPORT_FORMATS.join(', ')})`);
      format = value;
    } else rest.push(a);
  }
  return { rest, format };
}

export const command: CliCommand = {
  async run(argv) {
    const { rest, format } = takeExport(argv);
    const { args, params } = parsePlanArgs(rest);
    if (args.options.has('help')) { process.stdout.write(planUsage('plan', ' [--export llama.cpp|vllm|ollama]')); return 0; }
    const modelPath = typeof params.model === 'string' ? params.model : 'MODEL';
    if (isClusterHardware(params.hardware)) {
      const { plan: cp, model } = clusterRequest(params);
      const title = `pipeline plan of ${cp.model} on ${cp.hardware}`;
      const out = format === 'vllm' ? exportVllmCluster(cp, model, modelPath)
        : format === 'llama.cpp' ? exportLlamaCppCluster(cp, modelPath)
        : format === 'ollama' ? exportOllamaCluster(cp) : undefined;
      if (out) process.stdout.write(args.options.has('json') ? `${JSON.stringify(out, null, 2)}\n` : formatEngineExport(out, title));
      else process.stdout.write(args.options.has('json') ? `${JSON.stringify(cp, null, 2)}\n` : `${formatClusterPlan(cp)}\n`);
      return 0;
    }
    const plan = planRequest(params);
    if (format === 'vllm' || format === 'ollama') {
      const title = `${plan.chosenPolicy} plan of ${plan.model.name} on ${plan.hardware.name}`;
      const out = format === 'vllm' ? exportVllmSingle(plan, resolveModel(params.model), modelPath)
        : exportOllamaSingle(plan, modelPath, resolveHardware(params.hardware).cpu.cores);
      process.stdout.write(args.options.has('json') ? `${JSON.stringify(out, null, 2)}\n` : formatEngineExport(out, title));
      return 0;
    }
    if (format === 'llama.cpp') {
      const exported = exportLlamaCpp(plan);
      process.stdout.write(args.options.has('json') ? `${JSON.stringify(exported, null, 2)}\n` : formatLlamaCppExport(plan, exported));
      return 0;
    }
    process.stdout.write(args.options.has('json') ? `${JSON.stringify(plan, null, 2)}\n` : formatPlan(plan));
    return 0;
  },
};
