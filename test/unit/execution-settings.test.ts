// fulcrum.execution.kvFormat from package.json to the engine's options: the contributed setting
// offers exactly the engine's KV formats, extension/settings.ts reads it (an unknown value falls
// back to F16, as device falls back to auto), and engine/server/execution-params.ts refuses a
// wrong value with the field, the value and the formats there are.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Module from 'node:module';
import path from 'node:path';
import { test } from 'node:test';
import { ErrorCodes, ResponseError } from 'vscode-languageserver';
import { KV_FORMATS } from '../../engine/runtime/types';
import { parseExecutionParams } from '../../engine/server/execution-params';
import { repoRoot } from '../helpers/shared';

interface SettingSchema { type: string; default: unknown; enum?: string[]; enumDescriptions?: string[]; markdownDescription?: string }
const properties = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
  contributes: { configuration: { properties: Record<string, SettingSchema> } };
}).contributes.configuration.properties;

test('package.json: fulcrum.execution.kvFormat offers the engine\'s KV formats, default F16, beside the other execution settings', () => {
  const setting = properties['fulcrum.execution.kvFormat'];
  assert.ok(setting, 'the setting is contributed');
  assert.equal(setting.type, 'string');
  assert.equal(setting.default, 'F16');
  assert.deepEqual(setting.enum, [...KV_FORMATS]);
  assert.equal(setting.enumDescriptions?.length, KV_FORMATS.length);
  assert.match(setting.markdownDescription ?? '', /-ctk q8_0 -ctv q8_0/);
  assert.match(setting.markdownDescription ?? '', /53 %/);
  const keys = Object.keys(properties);
  const execution = keys.flatMap((k, i) => (k.startsWith('fulcrum.execution.') ? [i] : []));
  assert.deepEqual(execution, execution.map((_, j) => execution[0]! + j), `the fulcrum.execution.* settings are together: ${keys.join(', ')}`);
  assert.ok(keys.includes('fulcrum.execution.kvFormat') && keys.includes('fulcrum.execution.device'));
});

/**
 * extension/settings.ts with a stand-in for the `vscode` module (only the extension host has the
 * real one): getConfiguration('fulcrum').get answers from `values`, else the default it is given.
 * settings.ts is loaded once and keeps the stand-in, so the stand-in reads `current`.
 */
let current: Record<string, unknown> = {};
const settingsModule = ((): typeof import('../../extension/settings') => {
  const vscode = {
    workspace: {
      workspaceFolders: undefined,
      getConfiguration: (section: string) => {
        assert.equal(section, 'fulcrum');
        return { get: (key: string, fallback?: unknown) => (key in current ? current[key] : fallback) };
      },
    },
  };
  const loader = Module as unknown as { _load: (request: string, parent: unknown, isMain: boolean) => unknown };
  const original = loader._load;
  loader._load = (request, parent, isMain) => (request === 'vscode' ? vscode : original(request, parent, isMain));
  try {
    return require('../../extension/settings') as typeof import('../../extension/settings');
  } finally {
    loader._load = original;
  }
})();

function readSettingsWith(values: Record<string, unknown>): ReturnType<typeof settingsModule.readSettings> {
  current = values;
  return settingsModule.readSettings();
}

test('readSettings: kvFormat is the setting\'s value, F16 when unset or unknown', () => {
  assert.equal(readSettingsWith({}).kvFormat, 'F16');
  for (const format of KV_FORMATS) assert.equal(readSettingsWith({ 'execution.kvFormat': format }).kvFormat, format);
  // Not a format (ggml's names are upper case): F16, as an unknown device is 'auto'.
  assert.equal(readSettingsWith({ 'execution.kvFormat': 'q8_0' }).kvFormat, 'F16');
  assert.equal(readSettingsWith({ 'execution.kvFormat': 'Q4_0' }).kvFormat, 'F16');
  // Beside the other execution settings, which it does not disturb.
  const s = readSettingsWith({ 'execution.kvFormat': 'Q8_0', 'execution.device': 'loopback', 'execution.policy': 'kvpr', 'execution.vram': '2G' });
  assert.deepEqual([s.device, s.policy, s.vram, s.kvFormat], ['loopback', 'kvpr', '2G', 'Q8_0']);
});

test('parseExecutionParams: kvFormat passes through; a wrong one is refused with the field, the value and the formats', () => {
  assert.deepEqual(parseExecutionParams('fulcrum/loadModel', { kvFormat: 'Q8_0' }), { kvFormat: 'Q8_0' });
  assert.deepEqual(parseExecutionParams('fulcrum/loadModel', { device: 'cpu', policy: 'auto', kvFormat: 'F16' }), { device: 'cpu', policy: 'auto', kvFormat: 'F16' });
  assert.equal(parseExecutionParams('fulcrum/loadModel', { kvFormat: null }), undefined);
  for (const [value, shown] of [['q8_0', '"q8_0"'], ['Q4_0', '"Q4_0"'], ['', '""'], [8, '8'], [{}, '{}']] as const) {
    assert.throws(() => parseExecutionParams('initialize', { kvFormat: value }, 'initializationOptions.'), (err: unknown) => {
      assert.ok(err instanceof ResponseError, String(err));
      assert.equal(err.code, ErrorCodes.InvalidParams);
      assert.ok(err.message.includes(`initializationOptions.kvFormat must be 'F16' or 'Q8_0', got ${shown}`), err.message);
      return true;
    });
  }
});
