// Cluster files (issue 27 item 1): `--hardware FILE.json` describing N hosts and the network
// between them, for clusters that a one-line spec (cluster.ts) cannot say: hosts with their own
// memory, measured profiles, addresses for the exports. Example: examples/clusters/*.json.
//
//   {
//     "name": "two 4090 boxes",                        optional; default: the file name
//     "network": { "preset": "10GbE" }                 or { "bandwidthGBps": 1.125, "latencyUs": 50 }
//     "hosts": [                                       in pipeline order (host 0 runs the head)
//       { "name": "box-a", "cpu": "ryzen9-7950x", "memoryGiB": 64, "gpus": ["rtx4090"], "address": "10.0.0.1" },
//       { "name": "box-b", "profile": "box-b.json", "count": 1 }
//     ]
//   }
//
// A host is a host preset (`cpu`, a key of `fulcrum presets`; `memoryGiB` overrides its memory;
// `gpus` lists GPU preset keys) or a hardware profile file (`profile`, e.g. written by
// `fulcrum profile --json` on that host, relative to the cluster file). `count` repeats it.
//
// Decision: at most one GPU per host, because a host's plan (HardwareProfile) models one device;
// a host with several GPUs is refused with that reason rather than planned as if it had one.
// Decision: a file is a cluster file when its top-level object has `hosts`; any other .json
// stays a single-host profile (resolveHardware).

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { NETWORK_PRESETS, type ClusterProfile, type NetworkProfile } from './cluster';
import { GPU_PRESETS, HOST_PRESETS, composeProfile } from './presets';
import type { HardwareProfile } from './types';
import { validateProfile } from './validate';

const GiB = 1024 ** 3;
const MAX_HOSTS = 64;
const HOST_FIELDS = ['name', 'cpu', 'memoryGiB', 'gpus', 'profile', 'count', 'address'];
const NETWORK_FIELDS = ['name', 'preset', 'bandwidthGBps', 'latencyUs'];

/** Whether `spec` names an existing JSON file whose top level has `hosts` (a cluster file). */
export function isClusterFile(spec: string): boolean {
  if (!spec.trim().toLowerCase().endsWith('.json') || !existsSync(spec)) return false;
  try {
    const raw: unknown = JSON.parse(readFileSync(spec, 'utf8'));
    return typeof raw === 'object' && raw !== null && !Array.isArray(raw) && 'hosts' in raw;
  } catch {
    return false; // resolveHardware reports the JSON error for the file
  }
}

/** Reads and validates a cluster file; every error names the file and the field. */
export function readClusterFile(file: string): ClusterProfile {
  let text: string;
  try { text = readFileSync(file, 'utf8'); } catch (e) { throw new Error(`--hardware ${file}: cannot read (${(e as Error).message})`); }
  let raw: unknown;
  try { raw = JSON.parse(text); } catch (e) { throw new Error(`${file}: not JSON: ${(e as Error).message}`); }
  return parseClusterJson(raw, file);
}

/** Validates a parsed cluster file; `file` names it in errors and anchors relative profile paths. */
export function parseClusterJson(raw: unknown, file: string): ClusterProfile {
  const top = object(raw, file, 'the top level');
  unknownFields(top, ['name', 'network', 'hosts'], file, '');
  const name = top.name === undefined ? path.basename(file, '.json') : string(top.name, file, 'name');
  if (top.network === undefined) throw new Error(`${file}: missing field 'network' (e.g. {"preset": "10GbE"} or {"bandwidthGBps": 1.125, "latencyUs": 50})`);
  const network = parseNetwork(top.network, file);
  if (top.hosts === undefined) throw new Error(`${file}: missing field 'hosts' (a list of hosts in pipeline order)`);
  if (!Array.isArray(top.hosts) || top.hosts.length === 0) throw new Error(`${file}: hosts must be a non-empty list`);
  const hosts: HardwareProfile[] = [];
  const addresses: (string | undefined)[] = [];
  top.hosts.forEach((h: unknown, i: number) => {
    const { profile, count, address } = parseHost(h, file, `hosts[${i}]`);
    for (let k = 0; k < count; k++) { hosts.push(profile); addresses.push(count === 1 ? address : undefined); }
  });
  if (hosts.length > MAX_HOSTS) throw new Error(`${file}: ${hosts.length} hosts (counts included); at most ${MAX_HOSTS}`);
  return { name, hosts, network, ...(addresses.some((a) => a !== undefined) ? { addresses } : {}) };
}

function parseNetwork(raw: unknown, file: string): NetworkProfile {
  const n = object(raw, file, 'network');
  unknownFields(n, NETWORK_FIELDS, file, 'network.');
  if (n.preset !== undefined) {
    const key = string(n.preset, file, 'network.preset');
    const preset = NETWORK_PRESETS[key.toLowerCase()];
    if (!preset) throw new Error(`${file}: network.preset: unknown network '${key}' (known: ${Object.keys(NETWORK_PRESETS).join(', ')})`);
    if (n.bandwidthGBps !== undefined || n.latencyUs !== undefined) throw new Error(`${file}: network: give either 'preset' or 'bandwidthGBps' and 'latencyUs', not both`);
    return { ...preset, ...(n.name !== undefined ? { name: string(n.name, file, 'network.name') } : {}) };
  }
  if (n.bandwidthGBps === undefined) throw new Error(`${file}: network: missing field 'bandwidthGBps' (payload GB/s per link, e.g. 1.125 for 10 GbE) or 'preset'`);
  if (n.latencyUs === undefined) throw new Error(`${file}: network: missing field 'latencyUs' (one-way latency per message, µs)`);
  const gbps = number(n.bandwidthGBps, file, 'network.bandwidthGBps');
  if (!(gbps > 0)) throw new Error(`${file}: network.bandwidthGBps must be positive (got ${gbps})`);
  const latencyUs = number(n.latencyUs, file, 'network.latencyUs');
  if (latencyUs < 0) throw new Error(`${file}: network.latencyUs must be 0 or more (got ${latencyUs})`);
  const name = n.name !== undefined ? string(n.name, file, 'network.name') : `${gbps} GB/s, ${latencyUs} µs`;
  return { name, gbps, latencyUs };
}

function parseHost(raw: unknown, file: string, where: string): { profile: HardwareProfile; count: number; address: string | undefined } {
  const h = object(raw, file, where);
  unknownFields(h, HOST_FIELDS, file, `${where}.`);
  const count = h.count === undefined ? 1 : number(h.count, file, `${where}.count`);
  if (!Number.isInteger(count) || count < 1 || count > MAX_HOSTS) throw new Error(`${file}: ${where}.count must be an integer 1..${MAX_HOSTS} (got ${count})`);
  const address = h.address === undefined ? undefined : string(h.address, file, `${where}.address`);
  if (address !== undefined && count > 1) throw new Error(`${file}: ${where}: 'address' names one host; give each of the ${count} hosts its own entry`);
  const label = h.name === undefined ? undefined : string(h.name, file, `${where}.name`);
  let profile: HardwareProfile;
  if (h.profile !== undefined) {
    for (const k of ['cpu', 'memoryGiB', 'gpus']) if (h[k] !== undefined) throw new Error(`${file}: ${where}: '${k}' and 'profile' exclude each other (a profile file describes the whole host)`);
    const rel = string(h.profile, file, `${where}.profile`);
    const p = path.resolve(path.dirname(file), rel);
    let json: unknown;
    try { json = JSON.parse(readFileSync(p, 'utf8')); } catch (e) { throw new Error(`${file}: ${where}.profile '${rel}': ${(e as Error).message}`); }
    profile = validateProfile(json, `${file}: ${where}.profile ${rel}`);
  } else {
    if (h.cpu === undefined) throw new Error(`${file}: ${where}: missing field 'cpu' (a host preset: ${HOST_PRESETS.map((x) => x.key).join(', ')}) or 'profile' (a hardware profile file)`);
    const cpu = string(h.cpu, file, `${where}.cpu`);
    if (!HOST_PRESETS.some((x) => x.key === cpu)) throw new Error(`${file}: ${where}.cpu: unknown host preset '${cpu}' (known: ${HOST_PRESETS.map((x) => x.key).join(', ')})`);
    const gpus = h.gpus === undefined ? [] : h.gpus;
    if (!Array.isArray(gpus)) throw new Error(`${file}: ${where}.gpus must be a list of GPU preset names (e.g. ["rtx4090"]), or [] for none`);
    gpus.forEach((g: unknown, k: number) => {
      const key = string(g, file, `${where}.gpus[${k}]`);
      if (!GPU_PRESETS.some((x) => x.key === key)) throw new Error(`${file}: ${where}.gpus[${k}]: unknown GPU preset '${key}' (known: ${GPU_PRESETS.map((x) => x.key).join(', ')})`);
    });
    if (gpus.length > 1) throw new Error(`${file}: ${where}.gpus: ${gpus.length} GPUs on one host; a host's plan models one GPU, so list each GPU's share as its own host for now`);
    profile = composeProfile(gpus[0] as string | undefined, cpu);
    if (h.memoryGiB !== undefined) {
      const gib = number(h.memoryGiB, file, `${where}.memoryGiB`);
      if (!(gib > 0)) throw new Error(`${file}: ${where}.memoryGiB must be positive (got ${gib})`);
      profile.memory = { totalBytes: Math.round(gib * GiB), availableBytes: Math.round(gib * GiB * 0.9) };
    }
  }
  if (label !== undefined) profile = { ...profile, name: `${label} (${profile.name})` };
  return { profile, count, address };
}

type Json = Record<string, unknown>;

function object(v: unknown, file: string, where: string): Json {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`${file}: ${where} must be an object`);
  return v as Json;
}

function string(v: unknown, file: string, field: string): string {
  if (typeof v !== 'string' || v.trim() === '') throw new Error(`${file}: ${field} must be a non-empty string (got ${JSON.stringify(v)})`);
  return v.trim();
}

function number(v: unknown, file: string, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error(`${file}: ${field} must be a number (got ${JSON.stringify(v)})`);
  return v;
}

/** A misspelt field would otherwise be ignored silently (e.g. 'bandwidthGbps'). */
function unknownFields(o: Json, known: string[], file: string, prefix: string): void {
  for (const k of Object.keys(o)) if (!known.includes(k)) throw new Error(`${file}: unknown field '${prefix}${k}' (known: ${known.join(', ')})`);
}
