// Multi-host hardware (issue 27): N hosts, each a single-host HardwareProfile, and the network
// between them. Spec syntax for --hardware:
//   2x(rtx4090+ryzen9-7950x)@10GbE          two identical hosts on 10 Gigabit Ethernet
//   (rtx4090+ryzen9-7950x),(t4+xeon-...)@25GbE   different hosts, listed in pipeline order
// Each host part is anything resolveHost accepts (a machine preset or 'gpu+host').
//
// Decision: one network for all links (a switch); per-link bandwidth/latency differences are rare
// in the small clusters Fulcrum plans for. Cluster files (cluster-file.ts) say more per host.

import { hardwarePreset } from './presets';
import type { HardwareProfile } from './types';

export interface NetworkProfile {
  name: string;
  /** Payload bandwidth per link, GB/s (decimal). */
  gbps: number;
  /** One-way latency per message, µs. */
  latencyUs: number;
}

export interface ClusterProfile {
  name: string;
  hosts: HardwareProfile[];
  network: NetworkProfile;
  /** Network address of each host (cluster files' `address`), for the exports' commands. */
  addresses?: (string | undefined)[];
}

// Payload rates ~90 % of line rate for TCP; latencies typical of a switched LAN / RDMA fabric.
export const NETWORK_PRESETS: Record<string, NetworkProfile> = {
  '1gbe': { name: '1 Gigabit Ethernet', gbps: 0.9 * 1 / 8, latencyUs: 100 },
  '10gbe': { name: '10 Gigabit Ethernet', gbps: 0.9 * 10 / 8, latencyUs: 50 },
  '25gbe': { name: '25 Gigabit Ethernet', gbps: 0.9 * 25 / 8, latencyUs: 30 },
  '100gbe': { name: '100 Gigabit Ethernet', gbps: 0.9 * 100 / 8, latencyUs: 20 },
  'ib-hdr': { name: 'InfiniBand HDR 200 Gb/s', gbps: 0.9 * 200 / 8, latencyUs: 5 },
};

/** Whether a --hardware value is a cluster spec (has a network part). */
export function isClusterSpec(spec: string): boolean {
  return /@[^@]+$/.test(spec.trim()) && !spec.trim().toLowerCase().endsWith('.json');
}

function parseNetwork(text: string, spec: string): NetworkProfile {
  const n = NETWORK_PRESETS[text.trim().toLowerCase()];
  if (!n) throw new Error(`--hardware ${spec}: unknown network '${text}' (known: ${Object.keys(NETWORK_PRESETS).join(', ')})`);
  return n;
}

function parseHost(text: string, spec: string, resolveHost: (s: string) => HardwareProfile): HardwareProfile {
  const inner = text.trim().replace(/^\((.*)\)$/, '$1').trim();
  if (inner === '') throw new Error(`--hardware ${spec}: empty host part`);
  try { return resolveHost(inner); } catch (e) { throw new Error(`--hardware ${spec}: host '${inner}': ${(e as Error).message}`); }
}

/** Split on commas outside parentheses. */
function splitTop(text: string, spec: string): string[] {
  const parts: string[] = [];
  let depth = 0; let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') { depth--; if (depth < 0) throw new Error(`--hardware ${spec}: unbalanced ')'`); }
    if (ch === ',' && depth === 0) { parts.push(cur); cur = ''; } else cur += ch;
  }
  if (depth !== 0) throw new Error(`--hardware ${spec}: unbalanced '('`);
  parts.push(cur);
  return parts;
}

export function parseClusterSpec(spec: string, resolveHost: (s: string) => HardwareProfile = hardwarePreset): ClusterProfile {
  const at = spec.lastIndexOf('@');
  if (at < 0) throw new Error(`--hardware ${spec}: a multi-host spec needs '@NETWORK' (e.g. 2x(rtx4090+ryzen9-7950x)@10GbE)`);
  const network = parseNetwork(spec.slice(at + 1), spec);
  const hosts: HardwareProfile[] = [];
  for (const part of splitTop(spec.slice(0, at), spec)) {
    const rep = /^\s*(\d+)\s*x\s*(\(.*\))\s*$/i.exec(part);
    if (rep) {
      const n = Number(rep[1]);
      if (n < 1 || n > 64) throw new Error(`--hardware ${spec}: host count ${n} in '${part.trim()}' must be 1..64`);
      const h = parseHost(rep[2]!, spec, resolveHost);
      for (let i = 0; i < n; i++) hosts.push(h);
    } else hosts.push(parseHost(part, spec, resolveHost));
  }
  if (hosts.length < 1) throw new Error(`--hardware ${spec}: no hosts`);
  return { name: spec.trim(), hosts, network };
}

/** Time to send `bytes` over one link, ms. */
export function networkMs(net: NetworkProfile, bytes: number): number {
  return net.latencyUs / 1000 + bytes / (net.gbps * 1e9) * 1000;
}
