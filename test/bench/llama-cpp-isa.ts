// node-llama-cpp at one CPU level. llama.cpp's CPU backend ships as one library per level
// (libggml-cpu-haswell.so = AVX2, alderlake = AVX2 + AVX-VNNI, skylakex/icelake/zen4 = AVX-512,
// sapphirerapids = AMX, …) and
// loads the best one the CPU runs. To compare Fulcrum capped at an ISA (FULCRUM_ISA) with
// llama.cpp at the same level, a package tree is built in the temp directory in which
// @node-llama-cpp/linux-x64 holds only the chosen library (its binaries copied, the rest linked)
// and every other package links to this project's node_modules; the measurement process
// imports node-llama-cpp from there with NODE_PRESERVE_SYMLINKS=1, so it resolves that tree.
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../engine/native/addon';

export type IsaChoice = 'native' | 'avx2' | 'avxvnni' | 'avx512';

/** The llama.cpp CPU library for `isa` on this CPU (undefined: its own choice). */
export function llamaCpuVariant(isa: IsaChoice): string | undefined {
  if (isa === 'native') return undefined;
  if (isa === 'avx2') return 'haswell';
  if (isa === 'avxvnni') return 'alderlake';
  const flags = /^flags\s*:(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.split(/\s+/) ?? [];
  const has = (f: string) => flags.includes(f);
  // The most capable AVX-512 build this CPU runs (no AMX: that is another level).
  if (has('avx512_bf16') && has('avx512_vnni') && /AMD/.test(readFileSync('/proc/cpuinfo', 'utf8'))) return 'zen4';
  if (has('avx512_vnni')) return 'icelake';
  return 'skylakex';
}

/** Env for a measurement process that should load node-llama-cpp with only `variant`'s CPU library. */
export function llamaCppEnvFor(variant: string | undefined): Record<string, string> {
  if (!variant) return {};
  const root = path.join(os.tmpdir(), `fulcrum-nlc-${variant}`);
  const nm = path.join(root, 'node_modules');
  const realNm = path.join(packageRoot(), 'node_modules');
  const bins = path.join(realNm, '@node-llama-cpp', 'linux-x64', 'bins', 'linux-x64');
  if (!existsSync(path.join(bins, `libggml-cpu-${variant}.so`))) throw new Error(`node-llama-cpp has no libggml-cpu-${variant}.so in ${bins}`);
  rmSync(root, { recursive: true, force: true });
  mkdirSync(nm, { recursive: true });
  for (const name of readdirSync(realNm)) {
    if (name === '@node-llama-cpp' || name === '.bin') continue;
    symlinkSync(path.join(realNm, name), path.join(nm, name));
  }
  const scope = path.join(nm, '@node-llama-cpp');
  mkdirSync(scope);
  for (const name of readdirSync(path.join(realNm, '@node-llama-cpp'))) {
    if (name !== 'linux-x64') symlinkSync(path.join(realNm, '@node-llama-cpp', name), path.join(scope, name));
  }
  const pkg = path.join(scope, 'linux-x64');
  const realPkg = path.join(realNm, '@node-llama-cpp', 'linux-x64');
  mkdirSync(path.join(pkg, 'bins', 'linux-x64'), { recursive: true });
  for (const name of readdirSync(realPkg)) if (name !== 'bins') symlinkSync(path.join(realPkg, name), path.join(pkg, name));
  for (const name of readdirSync(bins)) {
    const other = /^libggml-cpu-(.+)\.so$/.exec(name);
    if (other && other[1] !== variant) continue;
    // Copied, not linked: the loader resolves a library's $ORIGIN (where llama.cpp looks for its
    // CPU libraries) through links, which would find every level again.
    copyFileSync(path.join(bins, name), path.join(pkg, 'bins', 'linux-x64', name));
  }
  return { NODE_PRESERVE_SYMLINKS: '1', FULCRUM_NODE_LLAMA_CPP: path.join(nm, 'node-llama-cpp') };
}
