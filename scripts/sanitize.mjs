// `npm run test:sanitize`: builds the C++ addon a second time with AddressSanitizer +
// UndefinedBehaviorSanitizer (or ThreadSanitizer with --tsan) in its own tree under
// native/build/sanitize/, never touching the shared Release build, then runs the test files
// that exercise the addon against that build. Offline: node-gyp uses the local Node headers.
//
// Node itself is not instrumented, so the sanitizer runtime has to be LD_PRELOADed into it;
// FULCRUM_NATIVE_PATH makes engine/native/addon.ts load the sanitized fulcrum.node instead of
// build/Release. Child processes the tests spawn inherit all of that through the environment.
// Before the tests, a canary library with a deliberate bug is loaded the same way to prove that
// reports are produced and recognised. Exit status: 1 on any sanitizer report or test failure,
// 2 when the sanitizer build or its checks could not be set up.
//
// Usage: node scripts/sanitize.mjs [--tsan] [--jobs N] [--no-build] [test files...]
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const nativeDir = path.join(root, 'native');
const gyp = path.join(root, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');

const argv = process.argv.slice(2);
const tsan = argv.includes('--tsan');
const noBuild = argv.includes('--no-build');
const jobsAt = argv.indexOf('--jobs');
const jobs = jobsAt >= 0 ? argv[jobsAt + 1] : '2';
const explicitTests = argv.filter((a, i) => !a.startsWith('--') && !(jobsAt >= 0 && i === jobsAt + 1));

const mode = tsan ? 'tsan' : 'asan';
const tree = path.join(nativeDir, 'build', 'sanitize', mode);

// -O1 keeps stacks readable while still inlining enough to look like the real build; frame
// pointers give ASan's fast unwinder whole stacks. UB aborts on the first report.
// float-cast-overflow is not part of GCC's `undefined` group, but the addon turns JS numbers
// (any double: 1e300, Infinity, NaN) into integers, so out-of-range conversions are checked too.
const sanitizeFlags = tsan
  ? ['-fsanitize=thread', '-fno-omit-frame-pointer', '-O1', '-g']
  : ['-fsanitize=address,undefined,float-cast-overflow', '-fno-omit-frame-pointer',
      '-fno-sanitize-recover=undefined,float-cast-overflow', '-O1', '-g'];
const runtimeLibs = tsan ? ['libtsan.so'] : ['libasan.so', 'libubsan.so'];

// Native-touching test files; missing ones are skipped (the suite grows while this exists).
const testPatterns = [
  /^test\/unit\/quant.*\.test\.ts$/,
  /^test\/unit\/kernels.*\.test\.ts$/,
  /^test\/unit\/runtime.*\.test\.ts$/,
  /^test\/unit\/gemm-tiles\.test\.ts$/,
  /^test\/unit\/repack\.test\.ts$/,
  // Grouped decode GEMVs (one pool run for Q/K/V, tapered claims).
  /^test\/unit\/gemv-group\.test\.ts$/,
  /^test\/parity\/step-exactness\.test\.ts$/,
  /^test\/unit\/swiglu\.test\.ts$/,
  /^test\/unit\/kv-cache\.test\.ts$/,
  // The Q8_0 KV cache (its pages, kernels, shifts) and its placements on the loopback device.
  /^test\/unit\/kv-q8_0\.test\.ts$/,
  /^test\/parity\/placement-kv-q8_0\.test\.ts$/,
  // Moving KV positions and re-rotating keys (native shiftKv, issue 23).
  /^test\/unit\/kv-shift.*\.test\.ts$/,
  // Logits into the caller's arrays (eval's `out`): direct, gathered and staged copies, a detached array.
  /^test\/unit\/logits-out\.test\.ts$/,
  /^test\/unit\/attention\.test\.ts$/,
  /^test\/unit\/profile-native\.test\.ts$/,
  /^test\/parity\/stories260k\.test\.ts$/,
  /^test\/parity\/synthetic\.test\.ts$/,
  /^test\/parity\/onnx-decoder\.test\.ts$/,
  /^test\/parity\/placement\.test\.ts$/,
  /^test\/parity\/plan-execution\.test\.ts$/,
  /^test\/parity\/batch-execution\.test\.ts$/,
  /^test\/unit\/vulkan\.test\.ts$/,
  /^test\/parity\/vulkan-execution\.test\.ts$/,
  // Architectures beyond llama (issue 24): LayerNorm, GELU, GeGLU, per-head norms, fused matrices.
  /^test\/parity\/architectures\.test\.ts$/,
  // Two placements per plan (prefill and decode op lists, issue 21).
  /^test\/parity\/prefill-placement\.test\.ts$/,
  // Layer-by-layer rows (APEX's asynchronous overlap, issue 21): residuals kept between steps.
  /^test\/parity\/layer-steps\.test\.ts$/,
  // APEX served live with its window (a deferred attention on its own thread across steps).
  /^test\/runtime\/online-ao\.test\.ts$/,
];

function log(msg) { process.stdout.write(`[sanitize:${mode}] ${msg}\n`); }

function nodeDirArgs() {
  const nodeRoot = path.resolve(path.dirname(process.execPath), '..');
  for (const dir of [nodeRoot, '/usr']) {
    if (existsSync(path.join(dir, 'include', 'node', 'node_api.h'))) return [`--nodedir=${dir}`];
  }
  return [];
}

function gxxFile(name) {
  const r = spawnSync('g++', [`-print-file-name=${name}`], { encoding: 'utf8' });
  const file = r.stdout.trim();
  // g++ echoes the bare name back when it does not have the library.
  if (r.status !== 0 || !path.isAbsolute(file) || !existsSync(file)) {
    throw new Error(`g++ has no ${name} (install the gcc sanitizer runtime)`);
  }
  return file;
}

/** Copies native/ sources into the sanitizer tree, keeping mtimes so make stays incremental,
 *  and drops sources that were deleted upstream. */
function syncSources() {
  mkdirSync(tree, { recursive: true });
  cpSync(path.join(nativeDir, 'list-sources.js'), path.join(tree, 'list-sources.js'), { preserveTimestamps: true });
  const dstSrc = path.join(tree, 'src');
  rmSync(dstSrc, { recursive: true, force: true });
  cpSync(path.join(nativeDir, 'src'), dstSrc, { recursive: true, preserveTimestamps: true });

  // Patch binding.gyp: drop the release optimisation level, add the sanitizer flags to every
  // target via target_defaults (gyp appends target lists to the defaults).
  const gypText = readFileSync(path.join(nativeDir, 'binding.gyp'), 'utf8');
  const spec = JSON.parse(gypText);
  const d = spec.target_defaults ?? (spec.target_defaults = {});
  const strip = (list) => (list ?? []).filter((f) => !/^-O[0-3s]$/.test(f));
  d.cflags = [...strip(d.cflags), ...sanitizeFlags];
  d.cflags_cc = [...strip(d.cflags_cc), ...sanitizeFlags];
  d.ldflags = [...(d.ldflags ?? []), ...sanitizeFlags.filter((f) => f.startsWith('-fsanitize') || f === '-g')];
  for (const t of spec.targets ?? []) {
    t.cflags = strip(t.cflags);
    t.cflags_cc = strip(t.cflags_cc);
  }
  const patched = JSON.stringify(spec, null, 2);
  const gypFile = path.join(tree, 'binding.gyp');
  // Rewrite only on change so make does not rebuild everything each run.
  if (!existsSync(gypFile) || readFileSync(gypFile, 'utf8') !== patched) writeFileSync(gypFile, patched);
  return patched;
}

function gypRun(args) {
  const r = spawnSync(process.execPath, [gyp, ...args, '--directory', tree, ...nodeDirArgs()], {
    cwd: root, stdio: 'inherit',
    // node-gyp's configure also honours CFLAGS/CXXFLAGS; keep the caller's out of our build.
    env: { ...process.env, CFLAGS: '', CXXFLAGS: '', LDFLAGS: '' },
  });
  if (r.status !== 0) throw new Error(`node-gyp ${args[0]} failed (exit ${r.status})`);
}

function build() {
  const patched = syncSources();
  const sources = ['base', 'avx2', 'avxvnni', 'avx512'].map((k) =>
    spawnSync(process.execPath, [path.join(tree, 'list-sources.js'), k]).stdout.toString()).join('\n');
  const stamp = path.join(tree, 'build', '.sources');
  const key = sources + patched;
  if (!existsSync(path.join(tree, 'build', 'Makefile')) || !existsSync(stamp) || readFileSync(stamp, 'utf8') !== key) {
    gypRun(['configure']);
    writeFileSync(stamp, key);
  }
  gypRun(['build', '-j', jobs]);
}

/** Proves the flags reached every target: each .mk's compile flags and the built objects. */
function verifyBuild(addon) {
  const problems = [];
  const buildDir = path.join(tree, 'build');
  for (const mk of readdirSync(buildDir).filter((f) => f.endsWith('.target.mk'))) {
    const text = readFileSync(path.join(buildDir, mk), 'utf8');
    const cc = text.match(/CFLAGS_CC_Release :=[^]*?(?=\n\n)/)?.[0] ?? '';
    for (const f of sanitizeFlags) if (!cc.includes(f)) problems.push(`${mk}: ${f} missing from CFLAGS_CC_Release`);
    if (/\s-O3\b/.test(cc)) problems.push(`${mk}: -O3 still present`);
  }
  const marker = tsan ? '__tsan_' : '__asan_';
  const nm = spawnSync('nm', ['-u', addon], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (!nm.stdout.includes(marker)) problems.push(`${addon}: no ${marker} references (not instrumented?)`);
  // Each static library must carry instrumented objects too.
  for (const lib of ['fulcrum_avx2.a', 'fulcrum_avx512.a']) {
    const file = path.join(buildDir, 'Release', lib);
    if (!existsSync(file)) { problems.push(`${lib} not built`); continue; }
    const r = spawnSync('nm', ['-u', file], { encoding: 'utf8', maxBuffer: 64 << 20 });
    if (!r.stdout.includes(marker)) problems.push(`${lib}: no ${marker} references`);
  }
  const ldd = spawnSync('ldd', [addon], { encoding: 'utf8' });
  const rt = tsan ? 'libtsan' : 'libasan';
  if (!ldd.stdout.includes(rt)) problems.push(`${addon}: not linked against ${rt}`);
  return problems;
}

function discoverTests() {
  if (explicitTests.length > 0) return explicitTests.filter((f) => existsSync(path.join(root, f)));
  const found = [];
  for (const dir of ['test/unit', 'test/parity', 'test/runtime']) {
    const abs = path.join(root, dir);
    if (!existsSync(abs)) continue;
    for (const f of readdirSync(abs).sort()) {
      const rel = `${dir}/${f}`;
      if (testPatterns.some((p) => p.test(rel))) found.push(rel);
    }
  }
  return found;
}

// Sanitizer reports carry these headers (ASan/UBSan/TSan, also the "SUMMARY:" tail line).
const reportRe = /(==\d+==ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer|SUMMARY: (Address|UndefinedBehavior|Thread)Sanitizer)/;

function runTests(files, env) {
  return new Promise((resolve) => {
    // One file per process keeps a sanitizer abort attributable to its file.
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...files], {
      cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'],
    });
    const reports = [];
    let tail = '';
    const scan = (chunk, out) => {
      out.write(chunk);
      const text = tail + chunk.toString();
      const lines = text.split('\n');
      tail = lines.pop() ?? '';
      for (const l of lines) if (reportRe.test(l)) reports.push(l.trim());
    };
    child.stdout.on('data', (c) => scan(c, process.stdout));
    child.stderr.on('data', (c) => scan(c, process.stderr));
    child.on('close', (code, signal) => resolve({ code, signal, reports }));
  });
}

// A deliberately broken library built with the same flags and loaded into node with the same
// environment: proves that a bug in instrumented code is reported and recognised here (a run
// that could not fail would prove nothing).
const canarySources = {
  asan: [`#include <stdlib.h>
volatile int sink;
volatile size_t n = 4;  /* unknown size at compile time: ASan, not UBSan's object-size, reports */
__attribute__((constructor)) static void canary(void) {
  int *p = (int *)malloc(n * sizeof(int));
  sink = p[n];  /* heap-buffer-overflow: one past the end */
  free(p);
}
`, `#include <limits.h>
volatile int big = INT_MAX, sink;
__attribute__((constructor)) static void canary(void) { sink = big + 1; /* signed overflow */ }
`],
  tsan: [`#include <pthread.h>
static int shared;
static void *bump(void *arg) { for (int i = 0; i < 1000; i++) shared++; return arg; }
__attribute__((constructor)) static void canary(void) {
  pthread_t a, b;
  pthread_create(&a, 0, bump, 0); pthread_create(&b, 0, bump, 0);
  pthread_join(a, 0); pthread_join(b, 0);
}
`],
};

function canary(env) {
  canarySources[mode].forEach((source, i) => {
    const src = path.join(tree, `canary${i}.c`);
    const lib = path.join(tree, `canary${i}.so`);
    writeFileSync(src, source);
    const cc = spawnSync('gcc', ['-shared', '-fPIC', ...sanitizeFlags, src, '-o', lib, '-pthread'], { encoding: 'utf8' });
    if (cc.status !== 0) throw new Error(`canary ${i} did not compile: ${cc.stderr}`);
    // dlopen runs the constructor; the load then fails "did not self-register", which is fine.
    const r = spawnSync(process.execPath, ['-e', `try { process.dlopen({ exports: {} }, ${JSON.stringify(lib)}); } catch {}`],
      { env, encoding: 'utf8' });
    const report = (r.stderr ?? '').split('\n').find((l) => reportRe.test(l));
    if (!report || r.status === 0) {
      throw new Error(`${src}: the deliberate bug was not reported (exit ${r.status}); sanitizer runtime not active?`);
    }
    log(`canary ${i}: deliberate bug reported as expected (${report.trim().slice(0, 90)})`);
  });
}

async function main() {
  const t0 = Date.now();
  if (!noBuild) {
    log(`building into ${path.relative(root, tree)} with ${sanitizeFlags.join(' ')} (-j ${jobs})`);
    build();
  }
  const addon = path.join(tree, 'build', 'Release', 'fulcrum.node');
  if (!existsSync(addon)) throw new Error(`${addon} missing; run without --no-build`);
  const problems = verifyBuild(addon);
  if (problems.length > 0) {
    for (const p of problems) log(`build check: ${p}`);
    throw new Error('sanitizer build is not instrumented as expected');
  }
  log(`addon: ${addon} (${(statSync(addon).size / 1e6).toFixed(1)} MB, instrumented)`);
  const buildSecs = ((Date.now() - t0) / 1000).toFixed(0);

  const files = discoverTests();
  if (files.length === 0) throw new Error('no native-touching test files found');
  log(`tests: ${files.join(' ')}`);

  const preload = runtimeLibs.map(gxxFile);
  // The one known third-party report, suppressed narrowly so vptr checks stay on for our code:
  // node-addon-api's ObjectWrap<T> constructor (napi-inl.h) does static_cast<T*>(this) while
  // only the ObjectWrap base is constructed (upstream nodejs/node-addon-api PR #1598). UBSan
  // never applies file suppressions to unrecoverable checks, but it does match vptr checks by
  // the object's dynamic type; that type is Napi::ObjectWrap<...> (mangled) only during exactly
  // that base constructor: a finished wrapper's dynamic type is the derived class.
  const ubsanSupp = path.join(tree, 'ubsan.supp');
  writeFileSync(ubsanSupp, 'vptr_check:N4Napi10ObjectWrapI\n');
  const env = {
    ...process.env,
    LD_PRELOAD: [...preload, ...(process.env.LD_PRELOAD ? [process.env.LD_PRELOAD] : [])].join(':'),
    FULCRUM_NATIVE_PATH: addon,
    // Leaks off: node's own (uninstrumented) allocations would drown the report.
    ASAN_OPTIONS: 'detect_leaks=0:abort_on_error=1',
    UBSAN_OPTIONS: `print_stacktrace=1:halt_on_error=1:suppressions=${ubsanSupp}`,
    // Node is not instrumented: without ignore_noninstrumented_modules its own libuv/worker
    // synchronisation (invisible to TSan) shows up as races at every start. Our addon is
    // instrumented, so its races are still reported. second_deadlock_stack: both stacks.
    TSAN_OPTIONS: 'halt_on_error=0:ignore_noninstrumented_modules=1:second_deadlock_stack=1:report_signal_unsafe=0',
  };

  // Prove which addon file a process with this environment really loads.
  const probe = spawnSync(process.execPath, ['--import', 'tsx', '-e',
    "const a = require('./engine/native/addon.ts'); a.loadAddon(); " +
    "const m = Object.keys(require.cache).find((k) => k.endsWith('.node')); console.log(m ?? 'none')"],
  { cwd: root, env, encoding: 'utf8' });
  const loaded = probe.stdout.trim().split('\n').pop() ?? '';
  log(`probe loaded: ${loaded}`);
  if (probe.status !== 0 || path.resolve(loaded) !== addon) {
    process.stderr.write(probe.stderr);
    throw new Error(`probe did not load the sanitized addon (status ${probe.status})`);
  }

  canary(env);

  const results = [];
  for (const f of files) {
    log(`running ${f}`);
    const t = Date.now();
    const r = await runTests([f], env);
    results.push({ file: f, ...r, secs: (Date.now() - t) / 1000 });
  }

  log('summary');
  let bad = 0;
  for (const r of results) {
    const ok = r.code === 0 && r.reports.length === 0;
    if (!ok) bad++;
    const why = ok ? '' : ` exit=${r.code ?? r.signal} reports=${r.reports.length}`;
    log(`  ${ok ? 'PASS' : 'FAIL'} ${r.file} (${r.secs.toFixed(1)}s)${why}`);
    for (const rep of [...new Set(r.reports)].slice(0, 5)) log(`       ${rep}`);
  }
  log(`build+check ${buildSecs}s, total ${((Date.now() - t0) / 1000).toFixed(0)}s; ${results.length - bad}/${results.length} files clean`);
  process.exitCode = bad > 0 ? 1 : 0;
}

main().catch((err) => {
  log(`error: ${err.message}`);
  process.exitCode = 2;
});
