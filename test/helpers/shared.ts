// Locating the read-only shared material (models, vocabularies) beside the repository, and
// scratch directories for tests. Tests that need a shared file skip with the reason this gives.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The repository root (this file lives in test/helpers/). */
export const repoRoot = path.resolve(__dirname, '..', '..');

/** The shared folder: $FULCRUM_SHARED, else ../shared beside the repository. */
export function sharedDir(): string {
  return process.env.FULCRUM_SHARED ?? path.resolve(repoRoot, '..', 'shared');
}

/** Absolute path of a file under the shared folder (whether or not it exists). */
export function sharedPath(...parts: string[]): string {
  return path.join(sharedDir(), ...parts);
}

/**
 * For `test(name, { skip: skipUnlessShared(p) }, …)`: false when the file exists, else the
 * reason to print.
 */
export function skipUnlessShared(file: string): false | string {
  return existsSync(file) ? false : `shared file ${file} is absent`;
}

/** A fresh temporary directory and a function that removes it. */
export function tempDir(prefix = 'fulcrum-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
