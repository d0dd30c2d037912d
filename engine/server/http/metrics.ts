// Prometheus text exposition of the server: requests, tokens, latencies, queue depth, KV use,
// and the executed split.
import type { SchedulerStats, ServeResult } from '../../runtime/scheduler/scheduler';
import type { LiveStats } from '../../runtime/scheduler/online';

const BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class Metrics {
  private ok = 0;
  private errors = 0;
  private cancelled = 0;
  private readonly latency = new Array<number>(BUCKETS_S.length + 1).fill(0);
  private latencySum = 0;
  private readonly firstToken = new Array<number>(BUCKETS_S.length + 1).fill(0);
  private firstTokenSum = 0;

  /**
   * One answered completion request, by outcome: 'error' for every 4xx/5xx answer (a refused
   * request is an error the client sees), 'cancelled' when the client left before the end.
   */
  count(outcome: 'ok' | 'error' | 'cancelled', ms: number): void {
    if (outcome === 'ok') this.ok++; else if (outcome === 'error') this.errors++; else this.cancelled++;
    const s = ms / 1000;
    this.latency[bucket(s)]!++;
    this.latencySum += s;
  }

  /** A generation that ran: its time to the first token. */
  observe(r: ServeResult): void {
    const f = r.firstTokenMs / 1000;
    this.firstToken[bucket(f)]!++;
    this.firstTokenSum += f;
  }

  /**
   * `live`: the online deciders' counts over the scheduler's life (`--policy neo|apex`; the
   * scheduler's onlineStats, which a re-plan's new decider adds to), absent when no decider ran.
   */
  render(stats: SchedulerStats, split: string, kvBytes: number, live?: LiveStats): string {
    const lines: string[] = [];
    const metric = (name: string, type: string, help: string, values: [string, number][]) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, v] of values) lines.push(`${name}${labels} ${v}`);
    };
    metric('fulcrum_http_requests_total', 'counter', 'Completion requests answered, by outcome.', [['{outcome="ok"}', this.ok], ['{outcome="error"}', this.errors], ['{outcome="cancelled"}', this.cancelled]]);
    metric('fulcrum_requests_cancelled_total', 'counter', 'Requests cancelled (client gone or aborted).', [['', stats.cancelled]]);
    metric('fulcrum_prompt_tokens_total', 'counter', 'Prompt tokens of admitted requests.', [['', stats.promptTokens]]);
    metric('fulcrum_prompt_tokens_reused_total', 'counter', 'Prompt tokens whose KV was reused from a slot.', [['', stats.reusedTokens]]);
    metric('fulcrum_generated_tokens_total', 'counter', 'Tokens generated.', [['', stats.generatedTokens]]);
    metric('fulcrum_steps_total', 'counter', 'Batched forward steps.', [['', stats.steps]]);
    metric('fulcrum_step_rows_total', 'counter', 'Token rows over all steps (divide by steps for the mean batch).', [['', stats.stepRows]]);
    metric('fulcrum_queue_depth', 'gauge', 'Requests waiting for a slot.', [['', stats.queued]]);
    metric('fulcrum_running_requests', 'gauge', 'Requests holding a KV slot.', [['', stats.running]]);
    metric('fulcrum_slots', 'gauge', 'KV sequences (most requests served at once).', [['', stats.slots]]);
    metric('fulcrum_kv_bytes_in_use', 'gauge', 'KV cache bytes held (host and device pages).', [['', kvBytes]]);
    metric('fulcrum_split_info', 'gauge', 'The executed split of the model between CPU and GPU.', [[`{split="${split.replace(/["\\\n]/g, ' ')}"}`, 1]]);
    if (live) {
      // The live NEO/APEX decisions (issue 21 item 2), counted by the scheduler across the
      // deciders a re-plan builds: monotonic for the server's lifetime, as counters must be.
      metric('fulcrum_online_iterations_total', 'counter', 'Iterations the online decider planned, by mode.', Object.entries(live.modes).map(([m, n]) => [`{mode="${m}"}`, n]));
      metric('fulcrum_online_attention_total', 'counter', 'Decode attentions the online decider placed, by where they ran.', [['{where="device"}', live.deviceAttended], ['{where="cpu"}', live.cpuAttended]]);
      metric('fulcrum_online_swaps_total', 'counter', 'KV moves between device and host the online decider made (out and in).', [['', live.swaps]]);
      metric('fulcrum_online_refused_total', 'counter', 'Admissions or swaps the device refused memory for.', [['', live.refused]]);
    }
    const histogram = (name: string, help: string, counts: number[], sum: number) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
      let acc = 0;
      BUCKETS_S.forEach((b, i) => { acc += counts[i]!; lines.push(`${name}_bucket{le="${b}"} ${acc}`); });
      acc += counts[BUCKETS_S.length]!;
      lines.push(`${name}_bucket{le="+Inf"} ${acc}`, `${name}_sum ${sum}`, `${name}_count ${acc}`);
    };
    histogram('fulcrum_request_duration_seconds', 'Completion request latency, arrival to last token.', this.latency, this.latencySum);
    histogram('fulcrum_first_token_seconds', 'Time to the first generated token.', this.firstToken, this.firstTokenSum);
    return `${lines.join('\n')}\n`;
  }
}

function bucket(s: number): number {
  const i = BUCKETS_S.findIndex((b) => s <= b);
  return i < 0 ? BUCKETS_S.length : i;
}
