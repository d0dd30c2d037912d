// Hand-written placements covering every path the lowering can produce (whole model on the
// device, streamed weights, intra-op row splits, layers split, attention on the CPU beside device
// matmuls, KV streamed to the device, KVPR's recomputation of a KV prefix), for a model of
// `layers` layers, with the op kinds each must compile to.
import { nativePlanOps, type NativeLayerPlacement, type NativeOpPlacement, type NativePlacement } from '../../engine/native/model';

export interface PlacementCase { name: string; placement: NativePlacement; expectKinds: string[] }

export function ops(loc: 'host' | 'device', extra: Partial<NativeOpPlacement> = {}): NativeLayerPlacement['ops'] {
  return Object.fromEntries(nativePlanOps().map((o) => [o, { loc, ...extra }]));
}

/** The placements; KVPR recomputes `recomputePrefix` positions (make the prompt longer than that). */
export function placementCases(layers: number, recomputePrefix = 70): PlacementCase[] {
  const every = (f: (i: number) => NativeLayerPlacement): NativeLayerPlacement[] => Array.from({ length: layers }, (_, i) => f(i));
  const split = Math.max(1, Math.floor(layers / 2));
  return [
    { name: 'everything on the device', placement: { layers: every(() => ({ ops: ops('device'), kv: 'device' })), head: { loc: 'device' } }, expectKinds: [] },
    { name: 'weights streamed', placement: { layers: every(() => ({ ops: ops('device', { weights: 'streamed' }), kv: 'device' })), head: { loc: 'device', weights: 'resident' } }, expectKinds: ['copy_weight'] },
    { name: 'intra-op row splits', placement: { layers: every(() => ({ ops: ops('device', { deviceFraction: 0.4 }), kv: 'device' })), head: { loc: 'device', deviceFraction: 0.5 } }, expectKinds: ['copy_cols'] },
    { name: 'layers split', placement: { layers: every((i) => ({ ops: ops(i < split ? 'host' : 'device'), kv: i < split ? 'host' : 'device' })), head: { loc: 'device' } }, expectKinds: ['copy_rows'] },
    { name: 'attention on the CPU', placement: { layers: every(() => ({ ops: { ...ops('device'), Attention: { loc: 'host' } }, kv: 'host' })), head: { loc: 'host' } }, expectKinds: ['copy_rows'] },
    { name: 'KV streamed to the device', placement: { layers: every(() => ({ ops: ops('device'), kv: 'host' })), head: { loc: 'device' } }, expectKinds: ['copy_kv'] },
    { name: 'KVPR recompute', placement: { layers: every(() => ({ ops: ops('device'), kv: 'host', recomputePrefix })), head: { loc: 'device' } }, expectKinds: ['save_acts', 'copy_acts', 'recompute_kv', 'copy_kv'] },
  ];
}
