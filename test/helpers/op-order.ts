// What the executor's dependencies allow, read from a compiled op list rather than from timings:
// which ops may run at the same time. Tests that a split overlaps its lanes check this, because a
// measured overlap depends on how the machine schedules threads (a copy of a tiny layer can end
// before the compute lane starts, most of all under a sanitizer).
import type { NativeCompiledOp } from '../../engine/native/model';
import type { MeasuredTrace } from '../../engine/runtime/trace';

const LANES = ['cpu', 'device', 'h2d', 'd2h'] as const;

/** The lane index deps and finishedBefore use (cpu, device, h2d, d2h). */
function laneIndex(op: NativeCompiledOp): number {
  return LANES.indexOf(op.lane);
}

/**
 * For each op of one list (one stage), the last op of every lane that has ended before it starts:
 * its own lane's predecessor and, through the executor's dependencies, everything they waited for.
 */
export function finishedBefore(ops: readonly NativeCompiledOp[]): number[][] {
  const before: number[][] = [];
  const lastOnLane = [-1, -1, -1, -1];
  ops.forEach((op, i) => {
    const lane = laneIndex(op);
    const known = [-1, -1, -1, -1];
    const take = (j: number) => {
      if (j < 0) return;
      const l = laneIndex(ops[j]!);
      known[l] = Math.max(known[l]!, j);
      before[j]!.forEach((k, m) => { known[m] = Math.max(known[m]!, k); });
    };
    take(lastOnLane[lane]!);
    op.deps.forEach((j) => take(j));
    before.push(known);
    lastOnLane[lane] = i;
  });
  return before;
}

/** Whether ops i and j of one list may run at once: neither waits, directly or through others, for the other. */
export function mayOverlap(ops: readonly NativeCompiledOp[], before: readonly number[][], i: number, j: number): boolean {
  return before[i]![laneIndex(ops[j]!)]! < j && before[j]![laneIndex(ops[i]!)]! < i;
}

/** A trace's compiled op lists (each op's deps index into its own list). */
export function opLists(trace: MeasuredTrace): NativeCompiledOp[][] {
  return trace.listStarts.map((start, i) => trace.ops.slice(start, trace.listStarts[i + 1] ?? trace.ops.length));
}
