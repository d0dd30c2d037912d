// The shape of one CLI command, plus the small argument parser they share.
import { KV_FORMATS, type KvFormat } from '../runtime/types';

export interface CliCommand {
  /** Returns the process exit code. */
  run(argv: string[]): Promise<number>;
}

export class UsageError extends Error {}

export interface ParsedArgs {
  /** --name value or --name=value; flags without a value are 'true'. */
  options: Map<string, string>;
  positionals: string[];
}

/**
 * Parses argv. `flags` names the options that take no value; every other --option takes one.
 * Unknown options are a UsageError naming the option.
 */
export function parseArgs(argv: string[], valueOptions: string[], flags: string[]): ParsedArgs {
  const options = new Map<string, string>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') { positionals.push(...argv.slice(i + 1)); break; }
    if (!a.startsWith('--') || a.length === 2) { positionals.push(a); continue; }
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(2, eq) : a.slice(2);
    if (flags.includes(name)) {
      if (eq > 0) throw new UsageError(`option --${name} takes no value`);
      options.set(name, 'true');
    } else if (valueOptions.includes(name)) {
      const value = eq > 0 ? a.slice(eq + 1) : argv[++i];
      if (value === undefined) throw new UsageError(`option --${name} needs a value`);
      options.set(name, value);
    } else {
      throw new UsageError(`unknown option --${name}`);
    }
  }
  return { options, positionals };
}

export function numberOption(args: ParsedArgs, name: string, fallback: number, min = -Infinity, max = Infinity): number {
  const raw = args.options.get(name);
  if (raw === undefined) return fallback;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || v > max) {
    throw new UsageError(`--${name} must be a number in [${min}, ${max}], got '${raw}'`);
  }
  return v;
}

/** `--kv-format f16|q8_0` (any case) as the engine's KvFormat; undefined when not given. */
export function kvFormatOption(args: ParsedArgs): KvFormat | undefined {
  const raw = args.options.get('kv-format');
  if (raw === undefined) return undefined;
  const format = KV_FORMATS.find((f) => f === raw.toUpperCase());
  if (!format) throw new UsageError(`--kv-format must be one of ${KV_FORMATS.map((f) => f.toLowerCase()).join(', ')}, got '${raw}'`);
  return format;
}

/** The usage lines of --kv-format, the same in every command that loads a model. */
export const KV_FORMAT_USAGE = `  --kv-format F        the KV cache's format: f16 (default) or q8_0 (llama.cpp's -ctk/-ctv q8_0:
                       K and V in 8-bit blocks of 32, 53 % of the memory and of what decode
                       attention reads; on a Vulkan device attention and the KV stay on the CPU)
`;

/**
 * The one line that says where a loaded model executes: the device and why, the policy, the split.
 * Separated by ' — ' and ';' rather than brackets, since device descriptions carry their own.
 */
export function executionLine(ex: { device: string; deviceReason: string; policy: string; split: string; fallback?: string }): string {
  // A split policy whose plan placed nothing on the device did not split: say so rather than
  // print 'policy: lia; split: CPU only' as if it had (issue 26 item 7).
  const idle = ex.policy !== 'cpu-only' && ex.split.startsWith('CPU only') && !ex.fallback;
  const what = idle ? `policy: ${ex.policy} placed nothing on the device; runs on the CPU only` : `policy: ${ex.policy}; split: ${ex.split}`;
  return `device: ${ex.device} — ${ex.deviceReason}; ${what}${ex.fallback ? `; fell back to the CPU: ${ex.fallback}` : ''}`;
}
