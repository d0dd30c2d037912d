// The status bar's words for where completions run with fulcrum.completions.endpoint set
// (extension/remote-status.ts): before the first completion, after one ran remotely, after the
// endpoint failed with and without a local model to fall back to.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { remoteText } from '../../extension/remote-status';

test('before any completion the status bar names the endpoint\'s host', () => {
  assert.equal(remoteText('http://gpu-box:8080/v1', undefined), 'completions on gpu-box:8080');
});

test('after a remote completion it names the host and the API that answered', () => {
  assert.equal(remoteText('http://gpu-box:8080', { endpoint: 'gpu-box:8080 (/infill)', ok: true }), 'on gpu-box:8080 (/infill)');
});

test('a failed endpoint says whether the local model answered or nothing did', () => {
  const failed = { endpoint: 'gpu-box:8080 (/infill)', ok: false, reason: 'gpu-box:8080/infill: connect ECONNREFUSED' } as const;
  assert.equal(remoteText('http://gpu-box:8080', { ...failed, fallback: 'local' }), 'local (gpu-box:8080 failed)');
  assert.equal(remoteText('http://gpu-box:8080', { ...failed, fallback: 'none' }), 'gpu-box:8080 failed');
});
