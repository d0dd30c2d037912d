// `fulcrum profile [--quick] [--json] [--out FILE] [--no-cache] [--cached]`: measures this
// machine's HardwareProfile with the native microbenchmarks, prints a summary (or the JSON),
// and caches it per machine fingerprint. Progress goes to stderr.
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { readCachedProfile, writeCachedProfile } from '../hardware/cache';
import { currentFingerprint } from '../hardware/machine';
import { runProfile } from '../profile/profiler';
import type { HardwareProfile } from '../hardware/types';
import { parseArgs, UsageError, type CliCommand } from './command';

const USAGE = `usage: fulcrum profile [--quick] [--json] [--out FILE] [--no-cache] [--cached]

Measures this machine: CPU GEMV/GEMM per weight format and thread count, decode attention by
KV length, memory bandwidth, CPU slowdown under a concurrent transfer, an end-to-end calibration
run of the executor (repeated until two runs agree within 10 %; a profile whose runs never agree
is shown but not cached), and the GPU that executes — the Vulkan device, through Fulcrum's own
kernels — with its host<->device link, when there is one.

  --quick      smaller grid: a few seconds for the CPU, plus the GPU's kernels (a software
               Vulkan device such as lavapipe compiles its shaders first: about 4 s more)
  --json       print the profile as JSON instead of a summary
  --out FILE   also write the profile JSON to FILE
  --no-cache   do not write the result to the per-machine cache
  --cached     print the cached profile of this machine without measuring
`;

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    if (argv.includes('--help') || argv.includes('-h')) {
      process.stdout.write(USAGE);
      return 0;
    }
    let args;
    try {
      args = parseArgs(argv, ['out'], ['quick', 'json', 'no-cache', 'cached']);
      if (args.positionals.length) throw new UsageError(`unexpected argument '${args.positionals[0]}'`);
      if (args.options.has('cached') && args.options.has('no-cache')) throw new UsageError('--cached and --no-cache contradict each other');
      const outArg = args.options.get('out');
      // Checked before measuring, so a typo does not cost a whole profile.
      if (outArg !== undefined && !existsSync(path.dirname(path.resolve(outArg)))) throw new UsageError(`--out ${outArg}: directory ${path.dirname(path.resolve(outArg))} does not exist`);
    } catch (e) {
      if (e instanceof UsageError) {
        process.stderr.write(`fulcrum profile: ${e.message}\n${USAGE}`);
        return 2;
      }
      throw e;
    }
    const json = args.options.has('json');
    const useCache = !args.options.has('no-cache');
    let profile: HardwareProfile;
    let cacheFile: string | undefined;
    if (args.options.has('cached')) {
      const hit = readCachedProfile(currentFingerprint().fingerprint);
      if (hit.status !== 'hit') {
        process.stderr.write(`fulcrum profile: no usable cached profile (${hit.status === 'stale' ? hit.reason : `${hit.file} does not exist`}); run \`fulcrum profile\`\n`);
        return 1;
      }
      profile = hit.profile;
      cacheFile = hit.file;
    } else {
      const abort = new AbortController();
      const onSigint = () => abort.abort();
      process.once('SIGINT', onSigint);
      try {
        profile = await runProfile({
          quick: args.options.has('quick'),
          writeCache: false,
          signal: abort.signal,
          onProgress: (f, msg) => process.stderr.write(`[${String(Math.round(f * 100)).padStart(3)}%] ${msg}\n`),
        });
      } finally {
        process.removeListener('SIGINT', onSigint);
      }
      // Probes that disagreed: shown, not cached (the note in the summary says why).
      if (useCache && !profile.source.unsettled) cacheFile = writeCachedProfile(profile);
    }
    const out = args.options.get('out');
    if (out) writeFileSync(out, `${JSON.stringify(profile, null, 2)}\n`);
    if (json) process.stdout.write(`${JSON.stringify(profile, null, 2)}\n`);
    else process.stdout.write(summarizeProfile(profile, cacheFile));
    return 0;
  },
};

const f1 = (x: number | undefined) => (x === undefined ? '-' : x >= 100 ? x.toFixed(0) : x.toFixed(1));

/** The human summary: one line per measured quantity, best thread count in parentheses. */
export function summarizeProfile(p: HardwareProfile, cacheFile?: string): string {
  const lines: string[] = [];
  const isa = Object.entries(p.cpu.isa).filter(([, v]) => v).map(([k]) => k).join(' ');
  lines.push(`${p.name}`);
  lines.push(`  CPU: ${p.cpu.name}, ${p.cpu.cores} cores / ${p.cpu.threads} threads; ${isa || 'baseline ISA'}`);
  lines.push(`  fingerprint ${p.source.fingerprint ?? '-'}, measured ${p.source.measuredAt ?? '-'}${p.source.quick ? ' (quick)' : ''}${p.source.durationMs ? ` in ${(p.source.durationMs / 1000).toFixed(1)} s` : ''}`);
  const byT = p.cpu.memory.byThreads ?? [];
  lines.push(`  memory: read ${f1(p.cpu.memory.readGBps)} GB/s, copy ${f1(p.cpu.memory.copyGBps)} GB/s${byT.length ? `  [${byT.map((b) => `${b.threads}t ${f1(b.readGBps)}/${f1(b.copyGBps)}`).join(', ')}]` : ''}`);
  const bestOf = (kernel: 'gemv' | 'gemm', format: string, tokens?: number) => {
    const ks = p.cpu.kernels.filter((k) => k.kernel === kernel && k.format === format && (tokens === undefined || k.tokens === tokens));
    const key = (k: (typeof ks)[number]) => (kernel === 'gemv' ? k.gbps ?? 0 : k.gflops ?? 0);
    return ks.reduce<(typeof ks)[number] | undefined>((b, k) => (!b || key(k) > key(b) ? k : b), undefined);
  };
  const formats = [...new Set(p.cpu.kernels.map((k) => k.format))];
  if (formats.length) {
    lines.push(`  GEMV (GB/s of weights): ${formats.map((f) => { const k = bestOf('gemv', f); return k ? `${f} ${f1(k.gbps)} (${k.threads}t)` : `${f} -`; }).join(', ')}`);
    const tokens = [...new Set(p.cpu.kernels.filter((k) => k.kernel === 'gemm').map((k) => k.tokens ?? 0))].sort((a, b) => a - b);
    for (const t of tokens) {
      lines.push(`  GEMM ${t} tokens (GFLOP/s): ${formats.map((f) => { const k = bestOf('gemm', f, t); return k ? `${f} ${f1(k.gflops)} (${k.threads}t)` : `${f} -`; }).join(', ')}`);
    }
  }
  if (p.cpu.attention.length) {
    const kvs = [...new Set(p.cpu.attention.map((a) => a.kvLength))].sort((a, b) => a - b);
    lines.push(`  decode attention (GB/s of KV): ${kvs.map((kv) => `${kv}: ${f1(Math.max(...p.cpu.attention.filter((a) => a.kvLength === kv).map((a) => a.gbps)))}`).join(', ')}`);
  }
  const c = p.cpu.contention;
  lines.push(c
    ? `  contention: ${c.kernel.toUpperCase()} ${c.format} on ${c.threads}t ${c.aloneMs.toFixed(3)} ms alone, ${c.contendedMs.toFixed(3)} ms during ${c.transfer} (${f1(c.transferGBps)} GB/s) -> factor ${p.cpu.contentionFactor.toFixed(2)}`
    : `  contention factor: ${p.cpu.contentionFactor}`);
  lines.push(`  peak CPU GFLOP/s: ${f1(p.cpu.peakGflops)}`);
  const k = p.cpu.calibration;
  if (k) {
    const runs = k.prefillRunsTokensPerS ? ` (fastest of ${k.runs} runs: prefill ${k.prefillRunsTokensPerS.map(f1).join(', ')}; decode ${k.decodeRunsTokensPerS?.map(f1).join(', ')}; ${k.agreed === false ? 'DISAGREED' : 'agreed'})` : ` (fastest of ${k.runs} runs)`;
    lines.push(`  calibration: executor prefill ${f1(k.prefillTokensPerS)} tok/s, decode ${f1(k.decodeTokensPerS)} tok/s${runs}; GEMV ×${k.gemvScale}, GEMM ×${k.gemmScale}`);
  }
  if (p.source.unsettled) lines.push(`  NOT CACHED: ${p.source.unsettled}`);
  const on = p.gpu?.measuredOn;
  if (p.gpu && p.link && on) {
    // Measured through the executor's own Vulkan kernels on the device that executes.
    const gemm = Math.max(...(p.gpu.kernels ?? []).map((x) => x.gemmTflops), p.gpu.fp16Tflops) * 1e3;
    const gemv = Math.max(0, ...(p.gpu.kernels ?? []).map((x) => x.gemvGBps));
    lines.push(`  GPU: Vulkan device ${on.device} (${on.type}${on.software ? ': a software device, running on this CPU' : ''}), ${(p.gpu.memoryBytes / 2 ** 30).toFixed(1)} GiB budget`);
    lines.push(`    measured through Fulcrum's kernels: matmul up to ${f1(gemm)} GFLOP/s, GEMV up to ${f1(gemv)} GB/s of weights, device memory copy ${f1(p.gpu.memoryGBps)} GB/s, submit + wait ${p.gpu.launchOverheadUs} us`);
    lines.push(`    host↔device copies: host→device ${f1(p.link.h2dPinnedGBps)} GB/s, device→host ${f1(p.link.d2hPinnedGBps)} GB/s`);
  } else if (p.gpu && p.link) {
    lines.push(`  GPU: ${p.gpu.name}, ${(p.gpu.memoryBytes / 2 ** 30).toFixed(1)} GiB, ${f1(p.gpu.fp16Tflops)} TFLOP/s fp16 (spec), ${f1(p.gpu.memoryGBps)} GB/s, gemv efficiency ${p.gpu.efficiency.gemv}`);
    lines.push(`  link: H2D ${f1(p.link.h2dPinnedGBps)} GB/s pinned, ${f1(p.link.h2dPageableGBps)} pageable; D2H ${f1(p.link.d2hPinnedGBps)} / ${f1(p.link.d2hPageableGBps)}; latency ${p.link.latencyUs} us`);
  } else {
    lines.push('  GPU: none');
  }
  for (const n of p.notes ?? []) lines.push(`  note: ${n}`);
  if (cacheFile) lines.push(`  cached: ${cacheFile}`);
  return `${lines.join('\n')}\n`;
}
