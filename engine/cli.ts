// `fulcrum <command> …`: one module per command under engine/cli/, each exporting `run`.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { CliCommand } from './cli/command';
import { addonPath, packageRoot } from './native/addon';

const commands: Record<string, () => Promise<CliCommand>> = {
  inspect: async () => (await import('./cli/inspect')).command,
  tokenize: async () => (await import('./cli/tokenize')).command,
  generate: async () => (await import('./cli/generate')).command,
  prompt: async () => (await import('./cli/prompt')).command,
  infill: async () => (await import('./cli/infill')).command,
  bench: async () => (await import('./cli/bench')).command,
  serve: async () => (await import('./cli/serve')).command,
  plan: async () => (await import('./cli/plan')).command,
  explain: async () => (await import('./cli/explain')).command,
  simulate: async () => (await import('./cli/simulate')).command,
  presets: async () => (await import('./cli/presets')).command,
  profile: async () => (await import('./cli/profile')).command,
  devices: async () => (await import('./cli/devices')).command,
};

function usage(): string {
  return `usage: fulcrum <command> [options]   (fulcrum --version: the version)\n\ncommands:\n${Object.keys(commands).map((c) => `  ${c}`).join('\n')}\n\nfulcrum <command> --help for a command's options\n`;
}

/** `fulcrum --version`: the package's version, the Node it runs on and the addon it would load. */
function versionText(): string {
  const root = packageRoot();
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  const addon = addonPath();
  return `fulcrum ${pkg.version}\nnode ${process.version}\naddon ${existsSync(addon) ? addon : `${addon} (not built: npm run build:native)`}\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-v' || name === 'version') {
    process.stdout.write(versionText());
    return 0;
  }
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage());
    return name ? 0 : 2;
  }
  const load = commands[name];
  if (!load) {
    process.stderr.write(`fulcrum: unknown command '${name}'\n${usage()}`);
    return 2;
  }
  const command = await load();
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    process.stderr.write(`fulcrum: ${err instanceof Error ? err.message : String(err)}\n`);
    if (process.env.FULCRUM_DEBUG && err instanceof Error) process.stderr.write(`${err.stack}\n`);
    process.exitCode = 1;
  },
);
