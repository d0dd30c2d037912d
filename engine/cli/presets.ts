// `fulcrum presets [--json]`: the hardware and model presets with their sources.

import { parseArgs, UsageError, type CliCommand } from './command';
import { GPU_PRESETS, HOST_PRESETS, MACHINE_PRESETS } from '../hardware/presets';
import { MODEL_PRESET_DEFS } from '../model/model-presets';

export function presetList(): Record<string, unknown> {
  return {
    machines: MACHINE_PRESETS.map((m) => ({ name: m.key, gpu: m.gpu ?? null, host: m.host, source: m.citation })),
    gpus: GPU_PRESETS.map((g) => ({ name: g.key, label: g.gpu.name, memoryGiB: g.gpu.memoryBytes / 2 ** 30, fp16Tflops: g.gpu.fp16Tflops, memoryGBps: g.gpu.memoryGBps, link: g.link.name, h2dGBps: g.link.h2dPinnedGBps, source: g.citation })),
    hosts: HOST_PRESETS.map((h) => ({ name: h.key, label: h.cpu.name, cores: h.cpu.cores, amx: h.cpu.isa.amx, memoryGiB: h.memoryBytes / 2 ** 30, memoryGBps: h.cpu.memory.readGBps, source: h.citation })),
    models: MODEL_PRESET_DEFS.map((d) => ({ name: d.key, label: d.name, family: d.family, layers: d.nLayers, hidden: d.nEmbd, heads: d.nHeads, kvHeads: d.nKvHeads, ffn: d.nFf, vocab: d.nVocab, context: d.contextLength, source: d.citation })),
  };
}

export const command: CliCommand = {
  async run(argv) {
    const args = parseArgs(argv, [], ['json', 'help']);
    if (args.options.has('help')) { process.stdout.write('usage: fulcrum presets [--json]\n\nHardware presets combine as GPU+HOST (e.g. rtx4090+ryzen9-7950x); models take :FORMAT (e.g. llama-3.1-8b:Q4_K).\n'); return 0; }
    if (args.positionals.length) throw new UsageError(`unexpected argument '${args.positionals[0]}'`);
    const list = presetList();
    if (args.options.has('json')) { process.stdout.write(`${JSON.stringify(list, null, 2)}\n`); return 0; }
    const out: string[] = ['machines (--hardware NAME):'];
    for (const m of MACHINE_PRESETS) out.push(`  ${m.key.padEnd(16)} ${(m.gpu ?? '(no GPU)').padEnd(20)} + ${m.host.padEnd(16)} ${m.citation}`);
    out.push('', 'GPUs (--hardware GPU+HOST):');
    for (const g of GPU_PRESETS) out.push(`  ${g.key.padEnd(20)} ${(g.gpu.memoryBytes / 2 ** 30).toFixed(0).padStart(3)} GiB ${String(g.gpu.memoryGBps).padStart(5)} GB/s ${String(g.gpu.fp16Tflops).padStart(6)} TFLOPS  ${g.link.name}  — ${g.citation}`);
    out.push('', 'hosts (alone = CPU-only machine):');
    for (const h of HOST_PRESETS) out.push(`  ${h.key.padEnd(16)} ${h.cpu.name}, ${h.cpu.cores} cores, ${h.cpu.memory.readGBps} GB/s${h.cpu.isa.amx ? ', AMX' : ''} — ${h.citation}`);
    out.push('', 'models (--model NAME[:FORMAT], architecture only):');
    for (const d of MODEL_PRESET_DEFS) out.push(`  ${d.key.padEnd(20)} ${d.family.padEnd(6)} ${d.nLayers} layers, d ${d.nEmbd}, ${d.nHeads}/${d.nKvHeads} heads, ${d.moe ? `${d.moe.nExpert} experts (top-${d.moe.nExpertUsed}) of ffn ${d.nFf}` : `ffn ${d.nFf}`}, vocab ${d.nVocab} — ${d.citation}`);
    process.stdout.write(out.join('\n') + '\n');
    return 0;
  },
};
