// `fulcrum explain`: the plan with every decision's alternatives, binding resource and what-ifs.

import type { CliCommand } from './command';
import { formatExplanation, parsePlanArgs, planUsage } from './plan-format';
import { explainRequest } from '../plan/api';
import { formatClusterPlan } from '../plan/multihost/pipeline';
import { clusterExplainRequest, isClusterHardware } from '../plan/multihost/request';

export const command: CliCommand = {
  async run(argv) {
    const { args, params } = parsePlanArgs(argv);
    if (args.options.has('help')) { process.stdout.write(planUsage('explain')); return 0; }
    if (isClusterHardware(params.hardware)) {
      // A cluster: the pipeline split with its reasons and what-ifs, then each host's own plan explained.
      const cp = clusterExplainRequest(params);
      if (args.options.has('json')) { process.stdout.write(`${JSON.stringify(cp, null, 2)}\n`); return 0; }
      process.stdout.write(`${formatClusterPlan(cp)}\n`);
      if (cp.whatIf?.length) process.stdout.write(`what if:\n${cp.whatIf.map((w) => `  ${w.change}: ${w.effect}`).join('\n')}\n`);
      // Each host plans its range as a model of that many layers, so its own text counts from 0.
      for (const s of cp.stages) process.stdout.write(`\n== host ${s.host}, layers ${s.firstLayer}–${s.endLayer - 1} (numbered 0–${s.endLayer - s.firstLayer - 1} below) ==\n${formatExplanation(s.plan)}`);
      return 0;
    }
    const plan = explainRequest(params);
    process.stdout.write(args.options.has('json') ? `${JSON.stringify(plan, null, 2)}\n` : formatExplanation(plan));
    return 0;
  },
};
