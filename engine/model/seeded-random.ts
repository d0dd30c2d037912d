// The engine's one seeded PRNG: mulberry32 (a 32-bit state, one add and three xor-shift-multiplies
// a draw). Synthetic weights, online workloads, the sampler and the GGUF fuzz test all draw from
// it, so one seed means one sequence everywhere. It lives in engine/model, the room that the
// planner and the runtime already stand on, so every user imports it downwards.

/** mulberry32: each call returns the next uint32 of the stream that `seed` starts. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** The same stream as uniform draws in [0, 1) (each uint32 / 2^32). */
export function seededRandom(seed: number): () => number {
  const next = mulberry32(seed);
  return () => next() / 4294967296;
}
