// `fulcrum explain`: the plan with every decision's alternatives, binding resource and what-ifs.

import type { CliCommand } from './command';
import { formatExplanation, parsePlanArgs, planUsage } from './plan-format';
import { explainRequest } from '../plan/api';

export const command: CliCommand = {
  async run(argv) {
    const { args, params } = parsePlanArgs(argv);
    if (args.options.has('help')) { process.stdout.write(planUsage('explain')); return 0; }
    const plan = explainRequest(params);
    process.stdout.write(args.options.has('json') ? `${JSON.stringify(plan, null, 2)}\n` : formatExplanation(plan));
    return 0;
  },
};
