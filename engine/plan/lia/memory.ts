// LIA (paper 002) memory arithmetic: host memory of a run and the CXL "Offloaded %" of Table 3.
// All parameters, KV and activations live in host memory (§5); KV = 2 (K,V) · layers · B · L · d_kv
// elements. Decision: CXL tiering (§6) is modelled only as this arithmetic (which bytes could move);
// no CXL bandwidth or interleave model, since no Fulcrum target machine has CXL memory.

import { type LiaLayerShape, layerKvBytesLia } from './sublayers';

/** Bytes of the KV cache of all layers for B sequences of L tokens. */
export function totalKvBytes(shape: LiaLayerShape, nLayers: number, batch: number, length: number): number {
  return nLayers * layerKvBytesLia(shape, batch, length);
}

/**
 * Table 3's "Offloaded %": the share of host memory that moves to CXL when all parameters go
 * there and KV stays in DDR (§6): params / (params + KV at L_in + L_out). Activations are not
 * counted (the digest checked that this reproduces all eight printed values).
 */
export function cxlOffloadedFraction(paramBytes: number, shape: LiaLayerShape, nLayers: number, batch: number, length: number): number {
  const kv = totalKvBytes(shape, nLayers, batch, length);
  return paramBytes / (paramBytes + kv);
}

/** The batch that fills the same DDR as batch B did once params move to CXL: B / (1 − f). */
export function batchAtSameDdr(batch: number, offloadedFraction: number): number {
  return batch / (1 - offloadedFraction);
}
