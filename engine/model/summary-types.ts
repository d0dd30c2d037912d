// What engine/model/summary.ts reports about a GGUF model: the model as a whole and its weight
// bytes per layer. Plain JSON shapes: the runtime, the LSP protocol, the CLI and the webviews share them.

export interface ModelSummary {
  path: string;
  name: string;
  architecture: string;
  fileBytes: number;
  parameters: number;
  contextLength: number;
  trainingContextLength: number;
  nLayers: number;
  nEmbd: number;
  nHeads: number;
  nKvHeads: number;
  nFf: number;
  nVocab: number;
  /** Tensor type name -> count of tensors of that type. */
  tensorTypes: Record<string, number>;
  /** The KV cache's element format the engine runs with ('F16', or 'Q8_0'). */
  kvFormat: string;
  /** KV cache bytes per position, every layer, in kvFormat. */
  kvBytesPerToken: number;
}

export interface LayerTensorSummary {
  name: string;
  type: string;
  shape: number[];
  bytes: number;
  /** 'attention' | 'ffn' | 'norm' | 'other' */
  group: 'attention' | 'ffn' | 'norm' | 'other';
}

export interface LayerSummary {
  /** Decoder layer index, or -1 for tensors outside the layers (embedding, output). */
  index: number;
  label: string;
  attentionBytes: number;
  ffnBytes: number;
  normBytes: number;
  otherBytes: number;
  totalBytes: number;
  tensors: LayerTensorSummary[];
}
