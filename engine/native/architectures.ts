// The decoder architectures the native executor runs (each a row of its ArchVariant table in
// native/src/model/model.cc). The GGUF reader refuses any other before reading weights, naming
// this list; the addon's model config carries one of them.

export type ModelArchitecture = 'llama' | 'qwen2' | 'qwen3' | 'phi3' | 'starcoder2' | 'gemma' | 'gemma2' | 'gemma3' | 'qwen3moe';
export const SUPPORTED_ARCHITECTURES: readonly ModelArchitecture[] = ['llama', 'qwen2', 'qwen3', 'phi3', 'starcoder2', 'gemma', 'gemma2', 'gemma3', 'qwen3moe'];
