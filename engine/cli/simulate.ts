// `fulcrum simulate`: play the plan on the discrete-event simulator; --trace FILE writes a Chrome
// trace-event JSON (open in Perfetto or chrome://tracing).

import { writeFileSync } from 'node:fs';
import type { CliCommand } from './command';
import { formatPlan, parsePlanArgs, planUsage } from './plan-format';
import { simulateRequest } from '../plan/api';
import { formatClusterPlan } from '../plan/multihost/pipeline';
import { clusterSimulateRequest, isClusterHardware } from '../plan/multihost/request';

function ms(x: number): string { return x >= 10_000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(3)} ms`; }

export const command: CliCommand = {
  async run(argv) {
    const { args, params } = parsePlanArgs(argv);
    if (args.options.has('help')) { process.stdout.write(planUsage('simulate', ' [--trace FILE]')); return 0; }
    const tracePath = args.options.get('trace');
    if (isClusterHardware(params.hardware)) {
      // A cluster: host and network lanes over the prefill and the first decode tokens.
      const { plan: cp, simulation: sim, trace } = clusterSimulateRequest({ ...params, trace: tracePath !== undefined });
      if (tracePath && trace) {
        try { writeFileSync(tracePath, JSON.stringify(trace)); } catch (e) { throw new Error(`--trace ${tracePath}: cannot write (${(e as Error).message})`); }
      }
      if (args.options.has('json')) { process.stdout.write(`${JSON.stringify({ plan: cp, simulation: sim }, null, 2)}\n`); return 0; }
      let text = `${formatClusterPlan(cp)}\n`;
      text += `simulated: prefill ${ms(sim.prefillMs)}, decode step ${ms(sim.decodeStepMs)} over ${sim.tokens} tokens; lanes busy: ${Object.entries(sim.busy).map(([k, v]) => `${k} ${ms(v)}`).join(', ')}\n`;
      if (tracePath) text += `trace written to ${tracePath} (open in https://ui.perfetto.dev)\n`;
      process.stdout.write(text);
      return 0;
    }
    const r = simulateRequest({ ...params, trace: tracePath !== undefined });
    if (tracePath && r.trace) {
      try { writeFileSync(tracePath, JSON.stringify(r.trace)); } catch (e) { throw new Error(`--trace ${tracePath}: cannot write (${(e as Error).message})`); }
    }
    if (args.options.has('json')) {
      // --json prints {plan, simulation}; the trace goes only to the --trace file.
      process.stdout.write(`${JSON.stringify({ plan: r.plan, simulation: r.simulation }, null, 2)}\n`);
      return 0;
    }
    const s = r.simulation;
    let text = formatPlan(r.plan);
    text += `simulated: prefill ${ms(s.prefillMs)}, decode step ${ms(s.decodeStepMs)} (${ms(s.layerMs)}/layer), ${s.tokensPerSecond.toFixed(2)} tok/s, workload ${ms(s.totalMs)}\n`;
    text += `decode lanes: ${Object.entries(s.decode.utilization).filter(([, u]) => u > 0).map(([k, u]) => `${k} ${(u * 100).toFixed(0)} % busy`).join(', ')}; bottleneck ${s.decode.bottleneck}\n`;
    if (s.online) text += `online: ${s.online.requests} requests at ${s.online.rate}/s: ${s.online.throughputTokensPerS.toFixed(1)} tok/s, ${s.online.perTokenLatencyMs.toFixed(1)} ms per token\n`;
    if (tracePath) text += `trace written to ${tracePath} (open in https://ui.perfetto.dev)\n`;
    process.stdout.write(text);
    return 0;
  },
};
