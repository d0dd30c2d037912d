// The timeline panel's trace reading: a measured run's sections (one per step) merge into one lane
// per lane name, each span keeping its section.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mergeLanesByName, parseTrace } from '../../webviews/timeline/trace';

test('lanes of several sections merge by lane name, in first-seen order, spans sorted and keeping their section', () => {
  const meta = (name: string, pid: number, tid: number, what: 'process_name' | 'thread_name') => ({ name: what, ph: 'M', ts: 0, pid, tid, args: { name } });
  const parsed = parseTrace({ traceEvents: [
    meta('step 1', 1, 0, 'process_name'), meta('CPU', 1, 1, 'thread_name'), meta('GPU', 1, 2, 'thread_name'),
    meta('step 2 (prefill placement)', 2, 0, 'process_name'), meta('GPU', 2, 2, 'thread_name'), meta('host→device', 2, 3, 'thread_name'),
    { name: 'b', ph: 'X', ts: 50, dur: 5, pid: 2, tid: 2 },
    { name: 'a', ph: 'X', ts: 10, dur: 4, pid: 1, tid: 2 },
    { name: 'c', ph: 'X', ts: 12, dur: 1, pid: 1, tid: 1 },
    { name: 'd', ph: 'X', ts: 60, dur: 2, pid: 2, tid: 3 },
  ] } as never);
  assert.equal(parsed.lanes.length, 4);
  const merged = mergeLanesByName(parsed.lanes, 'all steps');
  assert.deepEqual(merged.map((l) => [l.lane, l.section, l.busyUs]), [['CPU', 'all steps', 1], ['GPU', 'all steps', 9], ['host→device', 'all steps', 2]]);
  assert.deepEqual(merged[1]!.spans.map((s) => [s.name, s.section]), [['a', 'step 1'], ['b', 'step 2 (prefill placement)']]);
  assert.equal(new Set(merged.map((l) => l.key)).size, 3);
  // One section: nothing to merge, the same lanes.
  const one = parsed.lanes.filter((l) => l.section === 'step 1');
  assert.deepEqual(mergeLanesByName(one, 'x').map((l) => [l.lane, l.spans.length]), one.map((l) => [l.lane, l.spans.length]));
});
