// `fulcrum plan`: plan the CPU/GPU split of a model for a machine and workload.
// `--export llama.cpp` prints the llama.cpp/Ollama flags reproducing the plan's placement instead.

import { UsageError, type CliCommand } from './command';
import { formatPlan, parsePlanArgs, planUsage } from './plan-format';
import { planRequest } from '../plan/api';
import { exportLlamaCpp, formatLlamaCppExport } from '../plan/export-llamacpp';

const EXPORT_FORMATS = ['llama.cpp'];

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
    if (args.options.has('help')) { process.stdout.write(planUsage('plan', ' [--export llama.cpp]')); return 0; }
    const plan = planRequest(params);
    if (format === 'llama.cpp') {
      const exported = exportLlamaCpp(plan);
      process.stdout.write(args.options.has('json') ? `${JSON.stringify(exported, null, 2)}\n` : formatLlamaCppExport(plan, exported));
      return 0;
    }
    process.stdout.write(args.options.has('json') ? `${JSON.stringify(plan, null, 2)}\n` : formatPlan(plan));
    return 0;
  },
};
