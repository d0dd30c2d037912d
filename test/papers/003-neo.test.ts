// Paper 003 (NEO, MLSys'25) reproduction in simulation: the load-aware scheduler with
// asymmetric pipelining against the GPU-only baseline (SwiftLLM) and full offload (FastDecode⁺),
// on the paper's testbeds. The paper prints no per-op costs (digest 003 §5), so the costs are
// roofline costs of the hardware presets; every free parameter is named where it is set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hardwarePreset } from '../../engine/hardware/presets';
import { modelPreset } from '../../engine/model/model-presets';
import { type OnlineCosts, profilePredictors, rooflineOnlineCosts } from '../../engine/plan/neo/costs';
import { NeoScheduler, type NeoVariant } from '../../engine/plan/neo/scheduler';
import { generateWorkload } from '../../engine/plan/online/workload';
import { runOnline } from '../../engine/plan/online/loop';
import { simulateRequest } from '../../engine/plan/api';

const GiB = 2 ** 30;

function relative(costs: OnlineCosts, promptMean: number, outputMean: number, count: number, withOffloadAll = true): Record<NeoVariant, number> {
  const P = profilePredictors(costs);
  const limits = { nLayers: costs.nLayers, gpuKvTokens: costs.gpuKvTokens, cpuKvTokens: costs.cpuKvTokens, maxBatchTokens: costs.maxBatchTokens };
  // §5.1 synthetic workloads: lengths uniform in [0.9 l, 1.1 l]; all requests queued at once so
  // the run measures throughput.
  const w = generateWorkload({ rate: Infinity, count, prompt: { kind: 'uniform-10pct', mean: promptMean }, output: { kind: 'uniform-10pct', mean: outputMean }, seed: 7 });
  const tput = (v: NeoVariant): number => runOnline(w, new NeoScheduler(v, limits, P), costs).throughputTokensPerS;
  const base = tput('gpu-only');
  return { 'gpu-only': 1, neo: tput('neo') / base, 'offload-all': withOffloadAll ? tput('offload-all') / base : NaN };
}

// Headline comparisons through the CLI's code path (`fulcrum simulate --policy neo|gpu-only
// --workload …,rate=R,requests=N`, i.e. simulateRequest) on the presets as shipped: NEO against
// its GPU-only baseline (SwiftLLM: the same engine with every request on the GPU, §5.1).
// Decisions, not in the paper: rate 1e6 req/s queues every request at once, so the run measures
// throughput (the paper's Fig. 9/10a axis); vram=14G leaves 13.5 GiB after the 0.5 GiB reserve,
// the SwiftLLM/vLLM default utilisation 0.9 of the 15 GiB a T4 exposes.
function servingThroughput(policy: 'neo' | 'gpu-only' | 'apex', model: string, hardware: string, workload: string): number {
  const r = simulateRequest({ model, hardware, workload, policy });
  assert.ok(r.simulation.online, `${policy}: no online simulation`);
  return r.simulation.online.throughputTokensPerS;
}

test('Fig. 9 / Fig. 6c (CLI path): T4 + Llama-2-7B — NEO far above GPU-only, rising with output length', () => {
  // OSC-like short prompts (100 tokens; the figure's input length is not printed), 48 requests.
  const gains = [8, 128, 512].map((gen) => {
    const w = `batch=48,prompt=100,gen=${gen},rate=1000000,requests=48,vram=14G`;
    return servingThroughput('neo', 'llama-2-7b', 'g4dn.4xlarge', w) / servingThroughput('gpu-only', 'llama-2-7b', 'g4dn.4xlarge', w);
  });
  console.log(`# NEO/GPU-only on T4 (g4dn.4xlarge preset) at outputs 8, 128, 512: ${gains.map((g) => g.toFixed(2)).join(', ')} (paper: up to 7.5× Fig. 9, 5.63× Fig. 6c)`);
  // Magnitude: within a factor 2.5 of the paper's 7.5× peak. Why not closer: the preset's CPU
  // (8 Cascade Lake cores, 60 GB/s, assumed — the paper prints no bandwidth) and GPU costs are
  // rooflines; the gain comes from the baseline's KV capacity (≈ 1 GiB after 12.6 GiB of weights).
  assert.ok(Math.max(...gains) > 7.5 / 2.5, `peak gain ${Math.max(...gains).toFixed(2)}`);
  // §5.4 "As the output length increases, NEO's gains first grow".
  assert.ok(gains[0]! < gains[1]! && gains[1]! < gains[2]!, `gains ${gains.join(', ')}`);
  for (const g of gains) assert.ok(g > 0.97, `NEO never clearly below its baseline: ${g}`);
});

test('Fig. 10a (CLI path): A10G g5.2x/4x/8x/16x + Llama-3.1-8B — the gain tracks CPU memory bandwidth', () => {
  // Prompt 1000, output 200, 300 requests (decisions: AC-like lengths; the figure prints neither).
  const w = 'batch=64,prompt=1000,gen=200,rate=1000000,requests=300,vram=22G';
  const paper = [1.122, 1.133, 1.297, 1.793];
  const gains = ['g5.2xlarge', 'g5.4xlarge', 'g5.8xlarge', 'g5.16xlarge'].map((m) =>
    servingThroughput('neo', 'llama-3.1-8b', m, w) / servingThroughput('gpu-only', 'llama-3.1-8b', m, w));
  console.log(`# NEO/GPU-only on g5.2x/4x/8x/16x: ${gains.map((g) => g.toFixed(3)).join(', ')} (paper Fig. 10a: ${paper.join(', ')})`);
  // Trend: 2x ≈ 4x (same bandwidth, fewer cores: "the gain tracks memory bandwidth, not cores"), then rising.
  assert.ok(Math.abs(gains[0]! - gains[1]!) < 0.03, `g5.2x ${gains[0]} vs g5.4x ${gains[1]}`);
  assert.ok(gains[2]! > gains[1]! + 0.03 && gains[3]! > gains[2]! + 0.03, `gains ${gains.join(', ')}`);
  // Magnitude: each gain above 1 and the extra throughput (gain − 1) within a factor 3 of the paper's.
  gains.forEach((g, i) => {
    assert.ok(g > 1, `${g}`);
    const ratio = (g - 1) / (paper[i]! - 1);
    assert.ok(ratio > 1 / 3 && ratio < 3, `gain ${g.toFixed(3)} vs paper ${paper[i]} (extra throughput ratio ${ratio.toFixed(2)})`);
  });
});

function t4(cpuAttnGBps = 60): OnlineCosts {
  return rooflineOnlineCosts(modelPreset('llama-2-7b'), hardwarePreset('g4dn.4xlarge'), { vramBytes: 0.9 * 15 * GiB, cpuAttnGBps });
}

test('Fig. 9 / §5.4: A10G (g5.8xlarge) + Llama-3.1-8B — the gain rises, peaks, then falls back toward the baseline', () => {
  // g5.8xlarge preset (≈2× the g5.4x CPU bandwidth, Fig. 10a); prompts of 1000 tokens (decision:
  // AC-like; the figure's input length is not printed); 300 requests so GPU KV is the limit.
  // CPU attention at 40 GB/s, half the g5.8x preset's bandwidth (the preset runs PACPU at the full
  // 80 GB/s): the fall-back the paper describes appears where CPU attention is the limit; with the
  // full rate the gain at 1600 tokens stays at ≈ +20 % (paper: "profiling inaccuracy" adds to it).
  const costs = rooflineOnlineCosts(modelPreset('llama-3.1-8b'), hardwarePreset('g5.8xlarge'), { vramBytes: 0.9 * 24 * GiB, cpuAttnGBps: 40 });
  const gains = [25, 100, 1600].map((out) => relative(costs, 1000, out, 300, false).neo);
  console.log(`# NEO/GPU-only on g5.8xlarge at outputs 25, 100, 1600: ${gains.map((g) => g.toFixed(3)).join(', ')} (paper Fig. 10a: peak +29.7 % on g5.8x)`);
  // "NEO's gains first grow to the maximum point ... then gradually drop as the system launches a
  // larger proportion of GPU-only batches".
  assert.ok(gains[1]! > gains[0]! && gains[1]! > gains[2]!, `gains ${gains.join(', ')}`);
  assert.ok(gains[1]! > 1.03, `peak ${gains[1]}`);
  assert.ok(Math.abs(gains[2]! - 1) < 0.05, `long-output gain ${gains[2]} should be near the baseline`);
});

test('Fig. 10a (scheduler level): the gain grows with CPU attention bandwidth on the T4 machine', () => {
  // g5.2x ≈ g5.4x < g5.8x (≈2×) < g5.16x (≈4×): 12.2 %, 13.3 %, 29.7 %, 79.3 %. We scale the T4
  // machine's CPU attention bandwidth 1×, 2×, 4× and require a rising gain.
  const gains = [15, 30, 60].map((bw) => relative(t4(bw), 100, 128, 48, false).neo);
  console.log(`# NEO/GPU-only on T4 with CPU attention at 15, 30, 60 GB/s: ${gains.map((g) => g.toFixed(2)).join(', ')}`);
  assert.ok(gains[0]! < gains[1]! && gains[1]! < gains[2]!, `gains ${gains.join(', ')}`);
});

test('Fig. 8b: 2×H100 + Llama-3.1-70B, input 2000 — full offload (FastDecode⁺) collapses at long outputs, NEO stays at baseline', () => {
  // 2×H100 TP=2 modelled as one device with twice the memory, bandwidth and FLOPs; one NUMA node of
  // the HGX host (§5.1: 1/4 of its memory and bandwidth): CPU attention ≈ 0.25 × 500 GB/s × 0.5,
  // 512 GiB → CPU KV of 300 GiB. VRAM per GPU 74 GiB usable (decisions, not in the paper).
  const costs = rooflineOnlineCosts(modelPreset('llama-3.1-70b'), hardwarePreset('hgx-h100'), {
    vramBytes: 74 * GiB, tensorParallel: 2, cpuAttnGBps: 62.5, cpuKvBytes: 300 * GiB,
  });
  const short = relative(costs, 2000, 50, 32);
  const long = relative(costs, 2000, 400, 32);
  console.log(`# FastDecode⁺/baseline at outputs 50, 400: ${short['offload-all'].toFixed(2)}, ${long['offload-all'].toFixed(2)}; NEO ${short.neo.toFixed(2)}, ${long.neo.toFixed(2)} (paper: FastDecode⁺ < 0.60, NEO ≥ 1)`);
  assert.ok(long['offload-all'] < 0.6, `FastDecode⁺ ${long['offload-all']}`); // "drops quickly to less than 60%"
  assert.ok(long['offload-all'] < short['offload-all']); // falls as the output grows
  assert.ok(short.neo > 0.97 && long.neo > 0.97); // "NEO is always better in throughput than baseline" (within 3 %)
});

// Issue 21 item 5: at the T4 preset's own VRAM (16 GB less the reserve) NEO gains far less than the
// paper's 7.5×; the explanation says what limits it, with the paper's figures beside ours.
test('T4 preset at its own VRAM: explain names what limits NEO\'s gain, with the paper\'s numbers and ours at the paper\'s VRAM', async () => {
  const { explainRequest } = await import('../../engine/plan/api');
  const { neoSteadyGain } = await import('../../engine/plan/neo-gain');
  const { makeContext } = await import('../../engine/plan/context');
  const workload = 'batch=48,prompt=100,gen=512';
  const plan = explainRequest({ model: 'llama-2-7b', hardware: 'g4dn.4xlarge', workload, policy: 'neo' });
  const d = plan.explanation.decisions.find((x) => x.id === 'neo-gain');
  assert.ok(d, 'a neo-gain decision');
  const hw = hardwarePreset('g4dn.4xlarge');
  const own = neoSteadyGain(makeContext(modelPreset('llama-2-7b'), hw, { batch: 48, prompt: 100, gen: 512 }));
  const paperVram = neoSteadyGain(makeContext(modelPreset('llama-2-7b'), hw, { batch: 48, prompt: 100, gen: 512, vramBytes: 14 * GiB }));
  console.log(`# ${d.chosen}\n# ${d.reason}`);
  // Ours, stated and factored: gain = (served / baseline served) ÷ (iteration / baseline iteration).
  assert.match(d.chosen, new RegExp(`NEO ${own.gain.toFixed(2)}× its GPU-only baseline`));
  assert.ok(Math.abs(own.gain - (own.served / own.baselineServed) / (own.iterationMs / own.baselineIterationMs)) < 1e-9);
  // The limits, in words with their numbers: the GPU KV at this VRAM makes the baseline strong,
  // the two-batch schedule's doubled linear ops, and what caps the extra requests.
  assert.match(d.reason, new RegExp(`GPU KV holds ${own.gpuKvTokens} tokens at this VRAM, so the GPU-only baseline already serves ${own.baselineServed} of the 48 requests`));
  assert.match(d.reason, /runs the linear ops once per sub-batch .* an iteration takes [0-9.]+× the baseline's/);
  assert.match(d.reason, /caps the extra requests/);
  // The paper's figures beside ours, and ours at the paper's VRAM (0.9 of 15 GiB).
  assert.match(d.reason, /up to 7\.5× GPU-only throughput \(Fig\. 9/);
  assert.match(d.reason, new RegExp(`At the paper's VRAM \\(14 GiB.*NEO gains ${paperVram.gain.toFixed(2)}×`));
  // Why the gap: less VRAM leaves the baseline fewer requests, so NEO gains more there.
  assert.ok(paperVram.baselineServed < own.baselineServed && paperVram.gain > own.gain * 1.5, `${paperVram.gain} vs ${own.gain}`);
});
