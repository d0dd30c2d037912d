// What a llama.cpp export gives: shared by the dense export (export-llamacpp.ts) and the MoE
// one (export-llamacpp-moe.ts), which it calls, so neither imports the other for the type.
export interface LlamaCppExport {
  /** The flags, each as separate argv words (e.g. ['-ngl', '23', '-c', '8256']). */
  args: string[];
  /** The same flags as one shell-quoted line. */
  commandLine: string;
  /** Ollama Modelfile parameters for the parts Ollama exposes. */
  ollama: string[];
  /** Parts of the plan the flags do not reproduce, in words. */
  unsupported: string[];
}
