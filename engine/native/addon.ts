// Loads the C++ addon (native/build/Release/fulcrum.node). The path is found by walking up from
// this file to the package root, so it works from the sources (tsx), from dist/ bundles and
// from an installed .vsix alike.
import { existsSync } from 'node:fs';
import path from 'node:path';

let cached: unknown;

export function packageRoot(): string {
  let dir = __dirname;
  for (let i = 0; i < 6; i++) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'native'))) return dir;
    dir = path.dirname(dir);
  }
  throw new Error(`fulcrum: cannot find the package root above ${__dirname}`);
}

export function addonPath(): string {
  // An explicit file wins: the sanitizer build and private builds live outside build/Release.
  if (process.env.FULCRUM_NATIVE_PATH) return path.resolve(process.env.FULCRUM_NATIVE_PATH);
  const root = packageRoot();
  const variant = process.env.FULCRUM_NATIVE_BUILD ?? 'Release';
  return path.join(root, 'native', 'build', variant, 'fulcrum.node');
}

/** The raw addon. Callers wrap it in typed modules; the shape is declared where it is used. */
export function loadAddon<T = Record<string, unknown>>(): T {
  if (cached) return cached as T;
  const file = addonPath();
  if (!existsSync(file)) {
    throw new Error(`fulcrum: native addon not built (${file} is missing); run \`npm run build:native\``);
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  cached = require(file);
  return cached as T;
}
