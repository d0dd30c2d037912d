// The op vocabulary the addon owns (native/src/model/op_table.h): the executor's plan ops with
// the cost-model ops each one executes, the compiled op kinds, the lanes, the rows of a device
// step and of a KV page, and the device workspace a placement takes. Lowering, device budgets
// and traces read it here; TypeScript keeps no list of its own.
import { loadAddon } from './addon';

export interface NativePlanOpEntry {
  /** The plan op a placement places ('attn_norm', 'Q', …, 'Attention', …, 'Down'). */
  name: string;
  /** A weighted op: split by rows between device and CPU, with its weights resident or streamed. */
  matmul: boolean;
  /** The cost model's ops (engine/cost/ops.ts) it executes: Attention covers Scores, Softmax and WV. */
  covers: string[];
}

export interface NativeOpTable {
  planOps: NativePlanOpEntry[];
  /** Kinds of the compiled ops (traces, timings). */
  opKinds: string[];
  /** The executor's lanes ('cpu', 'device', 'h2d', 'd2h'). */
  lanes: string[];
  /** Rows of a step on a device: prompts run on it in chunks of this many. */
  deviceStepRows: number;
  /** Positions per KV cache page (the default page size). */
  kvPageTokens: number;
}

export interface WorkspaceShape {
  nLayers: number; nEmbd: number; nHeads: number; nKvHeads: number; headDim: number; nFf: number; nVocab: number;
}

interface OpTableAddon {
  opTable(): NativeOpTable;
  deviceWorkspaceBytes(shape: WorkspaceShape, batchSize: number, headOnDevice: boolean, maxSequences: number, pageTokens?: number): number;
}

let table: NativeOpTable | undefined;

export function nativeOpTable(): NativeOpTable {
  table ??= loadAddon<OpTableAddon>().opTable();
  return table;
}

/** Device bytes a placement needs besides weights and KV (native set_placement's activations, logits, converted rows, KV page slack). */
export function nativeDeviceWorkspaceBytes(shape: WorkspaceShape, batchSize: number, headOnDevice: boolean, maxSequences: number): number {
  return loadAddon<OpTableAddon>().deviceWorkspaceBytes(shape, batchSize, headOnDevice, maxSequences);
}
