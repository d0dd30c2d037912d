// Every policy, simplest first (auto breaks ties toward the front). One line per policy.

import { makeAutoPolicy } from './auto';
import type { Policy } from './policy';
import type { PolicyName } from './types';
import { policy as gpuOnly } from './gpu-only';
import { policy as cpuOnly } from './cpu-only';
import { policy as layerSplit } from './layer-split';
import { policy as splitPoints } from './split-points';
import { policy as kvpr } from './kvpr';
import { policy as lia } from './lia';
import { policy as neo } from './online/neo';
import { policy as apex } from './online/apex';
import { policy as moeOffload } from './moe-offload';

/** All concrete policies (auto excluded), simplest first. */
export const POLICIES: Policy[] = [
  gpuOnly,
  cpuOnly,
  layerSplit,
  splitPoints,
  kvpr,
  lia,
  neo,
  apex,
  moeOffload,
];

export const AUTO: Policy = makeAutoPolicy(() => POLICIES);

export function policyNames(): PolicyName[] {
  return [...POLICIES.map((p) => p.name), 'auto'];
}

export function getPolicy(name: string): Policy {
  if (name === 'auto') return AUTO;
  const p = POLICIES.find((x) => x.name === name);
  if (!p) throw new Error(`unknown policy '${name}' (policies: ${policyNames().join(', ')})`);
  return p;
}
