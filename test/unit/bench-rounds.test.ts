// bench:cpu's order of measurements in a row (engines alternate) and the median it takes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alternationOrder, median } from '../bench/bench-rounds';

test('alternation: Fulcrum, peer, Fulcrum, peer …; Fulcrum alone without a peer', () => {
  assert.deepEqual(alternationOrder(3, true), ['fulcrum', 'llama.cpp', 'fulcrum', 'llama.cpp', 'fulcrum', 'llama.cpp']);
  assert.deepEqual(alternationOrder(1, true), ['fulcrum', 'llama.cpp']);
  assert.deepEqual(alternationOrder(2, false), ['fulcrum', 'fulcrum']);
  assert.throws(() => alternationOrder(0, true), /runs must be a whole number ≥ 1, got 0/);
  assert.throws(() => alternationOrder(1.5, true), /got 1\.5/);
});

test('median: the middle value, the mean of the middle two for an even count; one slow run does not move it', () => {
  assert.equal(median([380, 151, 375]), 375);
  assert.equal(median([5]), 5);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.throws(() => median([]), /median of no values/);
});
