// What a model file holds, for people and planners: totals (parameters, tensor types, KV-cache
// bytes per token) and per-layer weight bytes grouped by the part of the layer that uses them.

import { ggmlTypeName } from './ggml-types';
import type { GgufFile, GgufTensorInfo } from './gguf/types';
import { readHparams, type ModelHparams } from './hparams';
import { formatBytesPerElement } from './shape';
import type { LayerSummary, LayerTensorSummary, ModelSummary } from './summary-types';

/** Default runtime context, as LoadOptions documents it: min(training context, 4096). */
const DEFAULT_CONTEXT_CAP = 4096;

export interface SummaryOptions {
  /** The context the model will run with; default min(training context, 4096). */
  contextLength?: number;
  /** Hyperparameters already read (saves reading them twice). */
  hparams?: ModelHparams;
  /** The KV cache's element format (a ggml type name, default 'F16'). */
  kvFormat?: string;
}

/** K and V in `kvFormat` (default F16), every layer: 2 × nLayers × nKvHeads × headDim × bytes per element. */
export function kvBytesPerToken(hp: Pick<ModelHparams, 'nLayers' | 'nKvHeads' | 'headDim'>, kvFormat = 'F16'): number {
  return 2 * hp.nLayers * hp.nKvHeads * hp.headDim * formatBytesPerElement(kvFormat);
}

/** Tensor type name -> number of tensors of that type. */
export function tensorTypeCounts(file: GgufFile): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const t of file.tensors) {
    const name = ggmlTypeName(t.type);
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

export function summarizeModel(file: GgufFile, opts: SummaryOptions = {}): ModelSummary {
  const hp = opts.hparams ?? readHparams(file);
  return {
    path: file.path,
    name: hp.name,
    architecture: hp.architecture,
    fileBytes: file.fileSize,
    parameters: file.tensors.reduce((sum, t) => sum + t.nElements, 0),
    contextLength: opts.contextLength ?? Math.min(hp.contextLength, DEFAULT_CONTEXT_CAP),
    trainingContextLength: hp.contextLength,
    nLayers: hp.nLayers,
    nEmbd: hp.nEmbd,
    nHeads: hp.nHeads,
    nKvHeads: hp.nKvHeads,
    nFf: hp.nFf,
    nVocab: hp.nVocab,
    tensorTypes: tensorTypeCounts(file),
    kvFormat: opts.kvFormat ?? 'F16',
    kvBytesPerToken: kvBytesPerToken(hp, opts.kvFormat),
  };
}

const LAYER_TENSOR = /^blk\.(\d+)\.(.+)$/;

/** Which part of a layer uses a tensor, from its llama.cpp name (without the blk.N. prefix). */
export function tensorGroup(localName: string): LayerTensorSummary['group'] {
  if (localName.includes('norm')) return 'norm';
  if (localName.startsWith('attn_')) return 'attention';
  if (localName.startsWith('ffn_')) return 'ffn';
  return 'other';
}

function emptyLayer(index: number): LayerSummary {
  return {
    index,
    label: index < 0 ? 'embedding & output' : `layer ${index}`,
    attentionBytes: 0,
    ffnBytes: 0,
    normBytes: 0,
    otherBytes: 0,
    totalBytes: 0,
    tensors: [],
  };
}

function addTensor(layer: LayerSummary, t: GgufTensorInfo, localName: string): void {
  const group = tensorGroup(localName);
  layer.tensors.push({ name: t.name, type: ggmlTypeName(t.type), shape: [...t.dims], bytes: t.byteSize, group });
  switch (group) {
    case 'attention': layer.attentionBytes += t.byteSize; break;
    case 'ffn': layer.ffnBytes += t.byteSize; break;
    case 'norm': layer.normBytes += t.byteSize; break;
    case 'other': layer.otherBytes += t.byteSize; break;
  }
  layer.totalBytes += t.byteSize;
}

/**
 * One entry per decoder layer (blk.N.*) in index order, preceded by index -1 for the tensors
 * outside the layers (token embedding, output norm, LM head), when there are any.
 */
export function layerSummaries(file: GgufFile): LayerSummary[] {
  const layers = new Map<number, LayerSummary>();
  for (const t of file.tensors) {
    const m = LAYER_TENSOR.exec(t.name);
    const index = m ? Number(m[1]) : -1;
    let layer = layers.get(index);
    if (!layer) { layer = emptyLayer(index); layers.set(index, layer); }
    addTensor(layer, t, m ? m[2]! : t.name);
  }
  return [...layers.values()].sort((a, b) => a.index - b.index);
}
