// Builds the C++ addon with node-gyp, offline: uses the local Node headers when the system has
// them, so nothing is downloaded. Incremental: re-runs `configure` only when the source list or
// binding.gyp changed (the list is computed at configure time by native/list-sources.js).
// A file lock serialises concurrent builds of the same tree.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, mkdirSync, openSync, closeSync, unlinkSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const nativeDir = path.join(root, 'native');
const buildDir = path.join(nativeDir, 'build');
const gyp = path.join(root, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');

function nodeDirArgs() {
  const nodeRoot = path.resolve(path.dirname(process.execPath), '..');
  for (const dir of [nodeRoot, '/usr']) {
    if (existsSync(path.join(dir, 'include', 'node', 'node_api.h'))) return [`--nodedir=${dir}`];
  }
  return [];
}

function run(args) {
  const r = spawnSync(process.execPath, [gyp, ...args, '--directory', 'native', ...nodeDirArgs()], { cwd: root, stdio: 'inherit' });
  // Throw rather than exit, so the lock below is released on failure.
  if (r.status !== 0) throw new Error(`node-gyp ${args[0]} failed (exit ${r.status})`);
}

function lock() {
  mkdirSync(buildDir, { recursive: true });
  const file = path.join(buildDir, '.lock');
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    try {
      const fd = openSync(file, 'wx');
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      return () => { try { unlinkSync(file); } catch { /* already gone */ } };
    } catch {
      // The lock names its owner's pid: a lock whose owner is gone (killed build) is stale.
      let owner = 0;
      try { owner = Number(readFileSync(file, 'utf8')) || 0; } catch { /* raced with its removal */ }
      let alive = true;
      if (owner > 0) { try { process.kill(owner, 0); } catch { alive = false; } }
      try {
        const age = Date.now() - statSync(file).mtimeMs;
        // No pid yet (just created) or a pid that is gone: stale after a grace period.
        if ((!alive && age > 2000) || (owner === 0 && age > 15 * 60_000)) unlinkSync(file);
      } catch { /* raced with its removal */ }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${file}`);
      spawnSync('sleep', ['1']);
    }
  }
}

const unlock = lock();
try {
  // Vulkan shaders to SPIR-V, embedded as C arrays (needs glslc; without it the device is unavailable).
  const embed = spawnSync(process.execPath, [path.join(nativeDir, 'embed-shaders.js')], { stdio: 'inherit' });
  if (embed.status !== 0) throw new Error('embedding the Vulkan shaders failed');
  const list = ['base', 'avx2', 'avxvnni', 'avx512'].map((k) =>
    spawnSync(process.execPath, [path.join(nativeDir, 'list-sources.js'), k]).stdout.toString()).join('\n')
    + readFileSync(path.join(nativeDir, 'binding.gyp'), 'utf8')
    + (process.env.FULCRUM_NATIVE_FLAGS ?? '');
  const stamp = path.join(buildDir, '.sources');
  const clean = process.argv.includes('--clean');
  const needConfigure = clean || !existsSync(path.join(buildDir, 'Makefile')) || !existsSync(stamp) || readFileSync(stamp, 'utf8') !== list;
  if (clean) run(['clean']);
  if (needConfigure) {
    run(['configure']);
    writeFileSync(stamp, list);
  }
  run(['build', '-j', 'max']);
} catch (err) {
  console.error(`build-native: ${err.message}`);
  process.exitCode = 1;
} finally {
  unlock();
}
