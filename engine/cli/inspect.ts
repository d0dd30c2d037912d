// `fulcrum inspect FILE [--json]`: what a GGUF model holds — architecture, hyperparameters,
// tensor types, parameters, weight bytes per layer, KV-cache bytes per token.

import { GgufFormatError, GgufMetadataError, readGguf, type GgufFile } from '../model/gguf/index';
import { ModelTensorError, readHparams, type ModelHparams } from '../model/hparams';
import { layerSummaries, summarizeModel, tensorTypeCounts } from '../model/summary';
import type { LayerSummary, ModelSummary } from '../runtime/types';
import { parseArgs, UsageError, type CliCommand } from './command';

import { describeNonFinite, findNonFiniteTensors } from '../model/gguf/check';
const HELP = `usage: fulcrum inspect FILE [--json] [--check]

Shows a GGUF model's architecture, hyperparameters, tensor types and counts, parameter count,
weight bytes per layer (attention / ffn / norm / other) and KV-cache bytes per token.

  --json    print one JSON object {summary, hparams, layers} instead of tables
  --check   also read every tensor and report any holding NaN or Inf (float values, or the
            float scales of quantized blocks); exit 1 when one does
`;

function bytesText(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return u === 0 ? `${n} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

function countText(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} K`;
  return String(n);
}

function typesText(types: Record<string, number>): string {
  return Object.entries(types).sort((a, b) => b[1] - a[1]).map(([t, n]) => `${t} × ${n}`).join(', ') || 'none';
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

function headerText(file: GgufFile): string {
  return `file          ${file.path}\n` +
    `format        GGUF v${file.version}, ${bytesText(file.fileSize)}, ${file.kv.size} metadata keys, ` +
    `${file.tensors.length} tensors, alignment ${file.alignment}, data at byte ${file.dataOffset}\n`;
}

function modelText(s: ModelSummary, hp: ModelHparams, layers: LayerSummary[]): string {
  const lines = [
    `model         ${hp.name} (${hp.architecture})`,
    `layers        ${hp.nLayers}`,
    `embedding     ${hp.nEmbd}`,
    `heads         ${hp.nHeads} query, ${hp.nKvHeads} key/value, head dimension ${hp.headDim}`,
    `feed-forward  ${hp.nFf}`,
    `vocabulary    ${hp.nVocab}`,
    `context       ${hp.contextLength} (training)`,
    `RoPE          ${hp.ropeStyle}, ${hp.ropeDims} dims, base ${hp.ropeFreqBase}, scaling ${hp.ropeScalingType}` +
      (hp.ropeScalingType === 'none' ? '' : ` ×${hp.ropeScalingFactor}`),
    `norm epsilon  ${Number(hp.normEps.toPrecision(6))}`,
    `output        ${hp.tiedOutput ? 'tied to token_embd' : 'separate output.weight'}; Q/K/V bias ${hp.hasQkvBias ? 'yes' : 'no'}${hp.hasQkNorm ? '; Q/K RMSNorm per head' : ''}`,
    `parameters    ${s.parameters.toLocaleString('en-US')} (${countText(s.parameters)})`,
    `tensor types  ${typesText(s.tensorTypes)}`,
    `KV cache      ${bytesText(s.kvBytesPerToken)} per token (f16 K and V); ` +
      `${bytesText(s.kvBytesPerToken * s.contextLength)} at context ${s.contextLength}`,
    '',
    'weights per layer',
    table(
      ['layer', 'attention', 'ffn', 'norm', 'other', 'total', 'types'],
      layers.map((l) => [
        l.label,
        bytesText(l.attentionBytes),
        bytesText(l.ffnBytes),
        bytesText(l.normBytes),
        bytesText(l.otherBytes),
        bytesText(l.totalBytes),
        [...new Set(l.tensors.map((t) => t.type))].join(','),
      ]),
    ),
  ];
  return `${lines.join('\n')}\n`;
}

/** Errors that mean "this file is not usable", as opposed to a bug in Fulcrum. */
function isFileProblem(e: unknown): e is Error {
  return e instanceof GgufFormatError || e instanceof GgufMetadataError || e instanceof ModelTensorError;
}

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    if (argv.includes('--help') || argv.includes('-h')) { process.stdout.write(HELP); return 0; }
    let args;
    try {
      args = parseArgs(argv, [], ['json', 'check']);
      if (args.positionals.length !== 1) throw new UsageError('expected exactly one FILE');
    } catch (e) {
      if (!(e instanceof UsageError)) throw e;
      process.stderr.write(`fulcrum inspect: ${e.message}\n${HELP}`);
      return 2;
    }
    const json = args.options.has('json');
    const path = args.positionals[0]!;

    let file: GgufFile;
    try {
      file = readGguf(path);
    } catch (e) {
      // Malformed files and file-system errors (missing file, permissions) are the user's to fix.
      if (!isFileProblem(e) && !(e instanceof Error && 'code' in e)) throw e;
      process.stderr.write(`fulcrum inspect: ${(e as Error).message}\n`);
      return 1;
    }

    let hp: ModelHparams;
    try {
      hp = readHparams(file);
    } catch (e) {
      if (!isFileProblem(e)) throw e;
      // A valid GGUF that Fulcrum cannot run: show what it holds, then the reason.
      if (json) {
        process.stdout.write(`${JSON.stringify({
          path: file.path, version: file.version, fileBytes: file.fileSize,
          tensors: file.tensors.length, tensorTypes: tensorTypeCounts(file), error: e.message,
        }, null, 2)}\n`);
      } else {
        process.stdout.write(headerText(file));
        process.stdout.write(`tensor types  ${typesText(tensorTypeCounts(file))}\n`);
      }
      process.stderr.write(`fulcrum inspect: not a model Fulcrum can run: ${e.message}\n`);
      return 1;
    }

    const summary = summarizeModel(file, { hparams: hp });
    const layers = layerSummaries(file);
    const damaged = args.options.has('check') ? findNonFiniteTensors(file) : undefined;
    if (json) {
      process.stdout.write(`${JSON.stringify({ summary, hparams: hp, layers, ...(damaged ? { nonFinite: damaged } : {}) }, null, 2)}\n`);
    } else {
      process.stdout.write(headerText(file));
      process.stdout.write(modelText(summary, hp, layers));
      if (damaged) process.stdout.write(damaged.length ? `check         ${damaged.length} damaged tensor(s):\n${describeNonFinite(path, damaged)}\n` : `check         every tensor's numbers are finite\n`);
    }
    return damaged?.length ? 1 : 0;
  },
};
