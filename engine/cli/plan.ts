// `fulcrum plan`: plan the CPU/GPU split of a model for a machine and workload.

import type { CliCommand } from './command';
import { formatPlan, parsePlanArgs, planUsage } from './plan-format';
import { planRequest } from '../plan/api';

export const command: CliCommand = {
  async run(argv) {
    const { args, params } = parsePlanArgs(argv);
    if (args.options.has('help')) { process.stdout.write(planUsage('plan')); return 0; }
    const plan = planRequest(params);
    process.stdout.write(args.options.has('json') ? `${JSON.stringify(plan, null, 2)}\n` : formatPlan(plan));
    return 0;
  },
};
