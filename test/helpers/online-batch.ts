// The batch the live NEO/APEX tests serve (online-live, online-trace, online-replan-metrics): eight
// requests of mixed prompt lengths on stories260K, and a device budget as a share of its weights.
import { readGguf } from '../../engine/model/gguf/index';
import { readHparams } from '../../engine/model/hparams';
import { deviceWorkspaceBytes } from '../../engine/runtime/devices';
import { sharedPath } from './shared';

export const MODEL = sharedPath('models', 'stories260K.gguf');
export const SEQS = 8;
export const LENGTHS = [5, 60, 12, 44, 20, 36, 28, 52];
/** One prompt per sequence, of LENGTHS tokens, distinct and reproducible. */
export const PROMPTS = LENGTHS.map((n, k) => Array.from({ length: n }, (_, i) => 1 + ((i * 31 + k * 7) % 511)));

/** Device bytes holding `f` of the weights plus the workspace of SEQS sequences at 512 positions. */
export function budget(f: number): number {
  const g = readGguf(MODEL);
  const size = g.tensors.reduce((s, t) => s + t.byteSize, 0);
  return Math.round(size * f + deviceWorkspaceBytes(readHparams(g), 512, true, SEQS));
}
