// `fulcrum devices [--json]`: the devices this addon can execute on, with their capabilities,
// and why each other one is unavailable; and what `--device auto` picks.
import { listDevices, resolveDevice } from '../runtime/devices';
import { parseArgs, type CliCommand } from './command';

const USAGE = `usage: fulcrum devices [--json]\n`;

export const command: CliCommand = {
  async run(argv: string[]): Promise<number> {
    const args = parseArgs(argv, [], ['json', 'help']);
    if (args.options.has('help')) {
      process.stdout.write(USAGE);
      return 0;
    }
    const listing = listDevices();
    const auto = resolveDevice('auto');
    if (args.options.has('json')) {
      process.stdout.write(`${JSON.stringify({ ...listing, auto }, null, 2)}\n`);
      return 0;
    }
    for (const d of listing.found) {
      process.stdout.write(`${d.name.padEnd(10)} ${d.description}${d.emulated ? ' [emulated: only with --device ' + d.name + ']' : ''}\n`);
      process.stdout.write(`${''.padEnd(10)} formats: ${d.formats.join(' ')}\n${''.padEnd(10)} ops: ${d.ops.join(' ')}\n`);
    }
    for (const u of listing.unavailable) process.stdout.write(`unavailable: ${u}\n`);
    process.stdout.write(`--device auto: ${auto.device} (${auto.reason})\n`);
    return 0;
  },
};
