// Hardware presets: GPUs (with their host link) and hosts from the papers' tables and public
// specifications, combined into machines. `--hardware NAME` takes a machine name or 'gpu+host'.
//
// Decision: presets carry specification peaks plus efficiency fractions that are typical of
// measured kernels (GPU GEMM 0.6, GEMV 0.8, attention 0.6; CPU GEMV at 0.8 of the DRAM bandwidth,
// CPU GEMM at 0.5 of the peak), since papers give only scattered measured points. A measured
// profile (`fulcrum profile`) replaces all of this on the user's own machine.

import { HARDWARE_PROFILE_VERSION, type CpuIsa, type CpuProfile, type GpuProfile, type HardwareProfile, type LinkProfile, type NvmeProfile } from './types';

const GiB = 1024 ** 3;

export interface GpuPreset { key: string; gpu: GpuProfile; link: LinkProfile; citation: string }
export interface HostPreset { key: string; cpu: CpuProfile; memoryBytes: number; nvme?: NvmeProfile; citation: string }
export interface MachinePreset { key: string; gpu?: string; host: string; citation: string; /** Override of the link (paper-measured). */ link?: Partial<LinkProfile> }

function link(name: string, pinned: number, pageable: number, pcieGen: number, pcieLanes: number): LinkProfile {
  return { name, h2dPinnedGBps: pinned, h2dPageableGBps: pageable, d2hPinnedGBps: pinned, d2hPageableGBps: pageable, latencyUs: 10, pcieGen, pcieLanes };
}
// Effective pinned bandwidths: ~80 % of the PCIe x16 payload rate. Paper 000 measured 24.4 GB/s
// on PCIe 4 (digest 000 §4). KVPR (§4, Table 1) and LIA (Table 2, §7) compute with the nominal
// 32 GB/s (PCIe 4) and 64 GB/s (PCIe 5): their machines use PCIE4_NOMINAL / PCIE5_NOMINAL so the
// papers' own numbers reproduce (machine presets below say so).
const PCIE3 = link('PCIe 3.0 x16', 12, 6, 3, 16);
const PCIE4 = link('PCIe 4.0 x16', 25, 12, 4, 16);
const PCIE4x8 = link('PCIe 4.0 x8', 12.5, 6, 4, 8);
const PCIE5 = link('PCIe 5.0 x16', 50, 20, 5, 16);
const PCIE4_NOMINAL: Partial<LinkProfile> = { name: 'PCIe 4.0 x16 (paper: nominal 32 GB/s)', h2dPinnedGBps: 32, d2hPinnedGBps: 32 };
// KVPR Table 1 divides KV MiB by 32 GiB/s (512 MiB → 15.6 ms): its "32 GB/s" is binary.
const KVPR_PCIE: Partial<LinkProfile> = { name: 'PCIe 4.0 x16 (KVPR Table 1: 32 GiB/s)', h2dPinnedGBps: 32 * GiB / 1e9, d2hPinnedGBps: 32 * GiB / 1e9 };
const PCIE5_NOMINAL: Partial<LinkProfile> = { name: 'PCIe 5.0 x16 (paper: nominal 64 GB/s)', h2dPinnedGBps: 64, d2hPinnedGBps: 64 };

/**
 * `gds`: GPUDirect Storage support (NVIDIA GDS documentation: data-center and professional RTX
 * GPUs; GeForce cards are not supported), so no plan reads NVMe straight into a GeForce GPU.
 */
function gpu(name: string, memGiB: number, tflops: number, gbps: number, gds: boolean): GpuProfile {
  return {
    name, memoryBytes: memGiB * GiB, fp16Tflops: tflops, memoryGBps: gbps,
    efficiency: { gemm: 0.6, gemv: 0.8, attention: 0.6 }, launchOverheadUs: 5, reservedBytes: 0.5 * GiB, gds,
  };
}

export const GPU_PRESETS: GpuPreset[] = [
  { key: 't4', gpu: gpu('NVIDIA T4', 16, 65, 320, true), link: PCIE3, citation: 'NVIDIA T4 datasheet: 16 GB GDDR6, 320 GB/s, 65 TFLOPS FP16, PCIe 3 x16' },
  { key: 'a10g', gpu: gpu('NVIDIA A10G', 24, 125, 600, true), link: PCIE4, citation: 'NEO §2 (A10G 600 GB/s, 125 TFLOPS); AWS g5: 24 GB, PCIe 4' },
  { key: 'a10', gpu: gpu('NVIDIA A10', 24, 125, 600, true), link: PCIE4, citation: 'NVIDIA A10 datasheet: 24 GB GDDR6, 600 GB/s, 125 TFLOPS FP16 dense (APEX Table 1)' },
  { key: 'rtx-a4000', gpu: gpu('NVIDIA RTX A4000', 16, 76.7, 448, true), link: link('PCIe 4.0 x16', 24.4, 12, 4, 16), citation: 'NVIDIA RTX A4000 datasheet: 16 GB, 448 GB/s, 153.4 TFLOPS FP16 tensor with sparsity (76.7 dense); H2D 24.4 GB/s from paper 000 Fig. 6a (digest 000 §4)' },
  { key: 'a100-40gb', gpu: gpu('NVIDIA A100 40GB PCIe', 40, 312, 1555, true), link: PCIE4, citation: 'NVIDIA A100 datasheet: 40 GB HBM2, 1,555 GB/s, 312 TFLOPS BF16; PCIe 4 x16 32 GB/s nominal (KVPR §4, LIA Table 2)' },
  { key: 'h100-pcie', gpu: gpu('NVIDIA H100 PCIe', 80, 756, 2000, true), link: PCIE5, citation: 'NVIDIA H100 PCIe datasheet: 80 GB HBM2e, 2.0 TB/s, 756 TFLOPS FP16 dense; PCIe 5 64 GB/s nominal (LIA Table 2)' },
  { key: 'h100-sxm', gpu: gpu('NVIDIA H100 SXM', 80, 989, 3350, true), link: PCIE5, citation: 'NVIDIA H100 SXM datasheet: 80 GB HBM3, 3.35 TB/s, 989 TFLOPS FP16 dense; host link PCIe 5 x16' },
  { key: 'rtx3060-12gb', gpu: gpu('NVIDIA GeForce RTX 3060 12GB', 12, 25.5, 360, false), link: PCIE4, citation: 'NVIDIA Ampere GA10x whitepaper / RTX 3060 spec: 12 GB GDDR6, 360 GB/s, FP16 tensor with FP32 accumulate 25.5 TFLOPS dense' },
  { key: 'rtx4060-laptop-8gb', gpu: gpu('NVIDIA GeForce RTX 4060 Laptop 8GB', 8, 29, 256, false), link: PCIE4x8, citation: 'NVIDIA RTX 4060 Laptop spec: 8 GB GDDR6 128-bit 16 Gbps (256 GB/s), PCIe 4 x8; FP16 tensor (FP32 acc) ≈ 2× FP32 shader rate ≈ 29 TFLOPS at ~2.3 GHz (derived)' },
  { key: 'rtx4090', gpu: gpu('NVIDIA GeForce RTX 4090', 24, 165.2, 1008, false), link: PCIE4, citation: 'NVIDIA Ada whitepaper: 24 GB GDDR6X, 1,008 GB/s, FP16 tensor with FP32 accumulate 165.2 TFLOPS dense; PCIe 4 x16' },
];

const NO_AVX512: CpuIsa = { avx2: true, fma: true, f16c: true, avx512f: false, avx512vnni: false, avx512bf16: false, amx: false };
const AVX512: CpuIsa = { ...NO_AVX512, avx512f: true, avx512vnni: true };
const AVX512BF16: CpuIsa = { ...AVX512, avx512bf16: true };
const AMX: CpuIsa = { ...AVX512BF16, amx: true };

/**
 * A CPU from specifications: `readGBps` sustained DRAM bandwidth, `peakGflops` BF16/FP16 matrix
 * peak as the CPU executes it. Kernel rates are derived (see the file's Decision).
 */
interface CpuRates {
  /** Measured GEMM rate (default half the peak). */
  gemmGflops?: number;
  /** Measured GEMV weight-read rate, uncontended (default 0.8 of readGBps). */
  gemvGBps?: number;
  /** Decode-attention KV-read rate, uncontended (default: the cost model's half of readGBps). */
  attnGBps?: number;
}

function cpu(name: string, cores: number, threads: number, isa: CpuIsa, readGBps: number, peakGflops: number, rates: CpuRates = {}): CpuProfile {
  const gemm = rates.gemmGflops ?? peakGflops * 0.5;
  const attnGBps = rates.attnGBps;
  const formats = ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K', 'Q6_K'];
  return {
    name, cores, threads, isa,
    kernels: formats.flatMap((format) => [
      { kernel: 'gemv' as const, format, threads: cores, gbps: rates.gemvGBps ?? readGBps * 0.8 },
      // Quantised GEMM dequantises on the fly: Decision 0.6 of the F16 rate.
      { kernel: 'gemm' as const, format, threads: cores, gflops: /^Q/.test(format) ? gemm * 0.6 : gemm },
    ]),
    // A paper's CPU decode-attention rate where it states or implies one (one point: the rate
    // holds at every KV length); otherwise the cost model's default (half the DRAM bandwidth).
    attention: attnGBps !== undefined ? [{ kvLength: 1024, threads: cores, gbps: attnGBps }] : [],
    memory: { readGBps, copyGBps: readGBps * 0.6 },
    contentionFactor: 1.9,
    peakGflops,
  };
}

/**
 * APEX §2.4 Fig. 1b: one attention layer, batch 4, sequence 1024 takes 3031 µs on the CPU and
 * 170 µs on the GPU ("CPU attention performance is typically < 10 % of the GPU's"). The APEX
 * hosts' CPU attention is that share of their GPU's modelled attention rate (memory bandwidth ×
 * attention efficiency 0.6). Inconsistency kept: Fig. 1b was measured on a V100 with 2× EPYC
 * 7251, not on the Table 1 machines, which the paper never measures.
 */
const APEX_CPU_ATTN_SHARE = 170 / 3031;

/**
 * Paper 000 Fig. 6a (OPT-30B, batch 50, BF16) measured CPU times while H2D runs: Q 5.775 ms for
 * 102.8 MB of weights, FC.0 23.216 ms for 411 MB → 17.8 GB/s contended; ÷ Fig. 10a's 1.9
 * contention factor → 33.8 GB/s alone. Scores 77.527 ms reads 378 MB of K (50 × 528 keys ×
 * 7168 × 2 B) → 4.9 GB/s contended, 9.3 GB/s alone. The presets' generic 0.8 × 60 GB/s GEMV
 * would make the CPU 26 % faster than the paper measured.
 */
const PAPER000_GEMV_GBPS = 33.8;
const PAPER000_ATTN_GBPS = 9.3;

export const HOST_PRESETS: HostPreset[] = [
  { key: 'ryzen9-7950x', cpu: cpu('AMD Ryzen 9 7950X', 16, 32, AVX512BF16, 60, 4600, { gemvGBps: PAPER000_GEMV_GBPS, attnGBps: PAPER000_ATTN_GBPS }), memoryBytes: 128 * GiB,
    nvme: { devices: 4, readGBps: 19.8 },
    citation: 'Paper 000 Table 1: 16 cores @4.5 GHz, BF16, 4×32 GB DDR5-5600 (2 channels, 89.6 GB/s peak; 60 GB/s sustained assumed), 4 NVMe (S2D ≈ 4.96 GB/s each, digest 000 §4)' },
  { key: 'xeon-8460h', cpu: cpu('Intel Xeon Platinum 8460H (SPR, AMX)', 40, 80, AMX, 260, 90100, { gemmGflops: 20000 }), memoryBytes: 512 * GiB,
    citation: 'LIA Table 2 and §4: 40 cores, 8× DDR5-4800 ≈ 260 GB/s measured, AMX 90.1 TFLOPS peak, ≈ 20 TFLOPS measured' },
  { key: 'granite-rapids', cpu: cpu('Intel Xeon 6 Granite Rapids (AMX)', 128, 256, AMX, 520, 180000, { gemmGflops: 40000 }), memoryBytes: 1024 * GiB,
    citation: 'LIA §4: 128 cores, 12× DDR5-5600 ≈ 2× SPR bandwidth (≈ 520 GB/s), AMX ≈ 40 TFLOPS measured' },
  { key: 'hgx-h100-host', cpu: cpu('2× Intel Xeon Platinum 8462Y+ (HGX H100 host)', 64, 128, AMX, 500, 140000, { gemmGflops: 30000 }), memoryBytes: 2048 * GiB,
    citation: 'NEO §5 hardware table: 64 cores, 2 TB; 2 sockets × 8× DDR5-4800 (614 GB/s peak, ≈ 500 sustained assumed); 4 NUMA nodes' },
  { key: 'g5.2xlarge', cpu: cpu('AMD EPYC 7R32 (8 vCPU)', 4, 8, NO_AVX512, 40, 600, { attnGBps: 40 }), memoryBytes: 32 * GiB,
    citation: 'NEO hardware table (g5.nxlarge: 2n cores… 16n GB); bandwidth relative to g5.4x ≈ 1× (NEO Fig. 10a); absolute 40 GB/s assumed; CPU attention (PACPU, ISPC) at the DRAM bandwidth (NEO Fig. 10a: the gain tracks memory bandwidth)' },
  { key: 'g5.4xlarge', cpu: cpu('AMD EPYC 7R32 (16 vCPU)', 8, 16, NO_AVX512, 40, 1200, { attnGBps: 40 }), memoryBytes: 64 * GiB,
    citation: 'NEO hardware table: g5.4xlarge, EPYC 7R32, 64 GB; x86 server ≈ 1.2 TFLOPS (NEO §2); absolute bandwidth 40 GB/s assumed (not in the paper)' },
  { key: 'g5.8xlarge', cpu: cpu('AMD EPYC 7R32 (32 vCPU)', 16, 32, NO_AVX512, 80, 2400, { attnGBps: 80 }), memoryBytes: 128 * GiB,
    citation: 'NEO Fig. 10a: ≈ 2× the g5.4x bandwidth' },
  { key: 'g5.16xlarge', cpu: cpu('AMD EPYC 7R32 (64 vCPU)', 32, 64, NO_AVX512, 160, 4800, { attnGBps: 160 }), memoryBytes: 256 * GiB,
    citation: 'NEO Fig. 10a: ≈ 4× the g5.4x bandwidth' },
  { key: 'g4dn.4xlarge', cpu: cpu('Intel Xeon Platinum 8259CL (16 vCPU)', 8, 16, AVX512, 60, 1000, { attnGBps: 60 }), memoryBytes: 64 * GiB,
    citation: 'NEO hardware table: g4.4xlarge, Xeon P-8259CL (8 cores), 64 GB; 60 GB/s assumed for 8 Cascade Lake cores of a 6× DDR4-2933 socket (140.8 GB/s peak); CPU attention (PACPU) at the DRAM bandwidth' },
  { key: 'xeon-6342x2', cpu: cpu('2× Intel Xeon Gold 6342', 48, 96, AVX512, 410, 8600, { attnGBps: APEX_CPU_ATTN_SHARE * 600 * 0.6 }), memoryBytes: 250 * GiB,
    citation: 'APEX Table 1: 2×24 cores @2.8 GHz, 250 GB; 8× DDR4-3200 per socket ≈ 205 GB/s (digest 004 external values); CPU attention = 170/3031 of the A10\'s (APEX Fig. 1b)' },
  { key: 'xeon-6130x2', cpu: cpu('2× Intel Xeon Gold 6130', 32, 64, AVX512, 256, 4300, { attnGBps: APEX_CPU_ATTN_SHARE * 320 * 0.6 }), memoryBytes: 180 * GiB,
    citation: 'APEX Table 1: 2×16 cores @2.1 GHz, 180 GB; 6× DDR4-2666 per socket ≈ 128 GB/s; CPU attention = 170/3031 of the T4\'s (APEX Fig. 1b)' },
  { key: 'epyc-64c', cpu: cpu('AMD EPYC 64 cores @2.6 GHz', 64, 128, NO_AVX512, 160, 5300), memoryBytes: 512 * GiB,
    citation: 'KVPR §4: AMD EPYC 64 cores at 2.6 GHz (DRAM not given; 8× DDR4-3200, 160 GB/s sustained, 512 GB assumed)' },
];

export const MACHINE_PRESETS: MachinePreset[] = [
  { key: 'paper000', gpu: 'rtx-a4000', host: 'ryzen9-7950x', citation: 'Paper 000 Table 1 (RTX A4000 16 GB + Ryzen 9 7950X)' },
  { key: 'kvpr-a100', gpu: 'a100-40gb', host: 'epyc-64c', citation: 'KVPR §4 (A100 40 GB, PCIe 4.0 x16 at 32 GiB/s as Table 1 computes, EPYC 64 cores)', link: KVPR_PCIE },
  { key: 'spr-a100', gpu: 'a100-40gb', host: 'xeon-8460h', citation: 'LIA Table 2 (PCIe 4.0, nominal 32 GB/s)', link: PCIE4_NOMINAL },
  { key: 'spr-h100', gpu: 'h100-pcie', host: 'xeon-8460h', citation: 'LIA Table 2 (PCIe 5.0, 64 GB/s)', link: PCIE5_NOMINAL },
  { key: 'gnr-a100', gpu: 'a100-40gb', host: 'granite-rapids', citation: 'LIA §4 (GNR; PCIe 4.0 nominal 32 GB/s)', link: PCIE4_NOMINAL },
  { key: 'gnr-h100', gpu: 'h100-pcie', host: 'granite-rapids', citation: 'LIA §4 (GNR; PCIe 5.0 64 GB/s)', link: PCIE5_NOMINAL },
  { key: 'g5.2xlarge', gpu: 'a10g', host: 'g5.2xlarge', citation: 'NEO §5 / AWS g5' },
  { key: 'g5.4xlarge', gpu: 'a10g', host: 'g5.4xlarge', citation: 'NEO §5 / AWS g5 (default A10G machine)' },
  { key: 'g5.8xlarge', gpu: 'a10g', host: 'g5.8xlarge', citation: 'NEO §5 / AWS g5' },
  { key: 'g5.16xlarge', gpu: 'a10g', host: 'g5.16xlarge', citation: 'NEO §5 / AWS g5' },
  { key: 'g4dn.4xlarge', gpu: 't4', host: 'g4dn.4xlarge', citation: 'NEO §5 (T4 machine)' },
  { key: 'hgx-h100', gpu: 'h100-sxm', host: 'hgx-h100-host', citation: 'NEO §5 (HGX 8×H100; one GPU modelled)' },
  { key: 'apex-a10', gpu: 'a10', host: 'xeon-6342x2', citation: 'APEX Table 1' },
  { key: 'apex-t4', gpu: 't4', host: 'xeon-6130x2', citation: 'APEX Table 1' },
];

function findGpu(key: string): GpuPreset | undefined { return GPU_PRESETS.find((g) => g.key === key); }
function findHost(key: string): HostPreset | undefined { return HOST_PRESETS.find((h) => h.key === key); }

/** Builds a profile from a GPU preset key (or none) and a host preset key. */
export function composeProfile(gpuKey: string | undefined, hostKey: string, citation?: string, linkOverride?: Partial<LinkProfile>): HardwareProfile {
  const host = findHost(hostKey);
  if (!host) throw new Error(`unknown host preset '${hostKey}' (hosts: ${HOST_PRESETS.map((h) => h.key).join(', ')})`);
  const g = gpuKey ? findGpu(gpuKey) : undefined;
  if (gpuKey && !g) throw new Error(`unknown GPU preset '${gpuKey}' (GPUs: ${GPU_PRESETS.map((x) => x.key).join(', ')})`);
  const profile: HardwareProfile = {
    version: HARDWARE_PROFILE_VERSION,
    name: g ? `${g.key}+${host.key}` : host.key,
    cpu: structuredClone(host.cpu),
    memory: { totalBytes: host.memoryBytes, availableBytes: Math.round(host.memoryBytes * 0.9) },
    source: { kind: 'preset', citation: citation ?? [g?.citation, host.citation].filter(Boolean).join('; ') },
  };
  if (g) {
    profile.gpu = structuredClone(g.gpu);
    profile.link = { ...structuredClone(g.link), ...linkOverride };
  }
  if (host.nvme) profile.nvme = { ...host.nvme };
  return profile;
}

/**
 * A measured profile (this machine's CPU, memory and NVMe) with a GPU preset and its link in
 * place of whatever GPU it has: `--hardware this+rtx4060-laptop-8gb` for what-if planning.
 */
export function withGpuPreset(base: HardwareProfile, gpuKey: string): HardwareProfile {
  const key = gpuKey.trim().toLowerCase();
  const g = findGpu(key);
  if (!g) throw new Error(`unknown GPU preset '${gpuKey}' after 'this+' (GPUs: ${GPU_PRESETS.map((x) => x.key).join(', ')})`);
  const p = structuredClone(base);
  p.name = `${base.source.kind === 'measured' ? 'this' : base.name}+${g.key}`;
  p.gpu = structuredClone(g.gpu);
  p.link = structuredClone(g.link);
  p.source = { ...p.source, citation: `CPU and memory: ${base.source.citation}; GPU and link: preset ${g.key} (${g.citation})` };
  p.notes = [...(base.notes ?? []), `GPU ${g.gpu.name} is a preset, not this machine's device (what-if)`];
  return p;
}

/**
 * A hardware preset by name: a machine key ('paper000', 'g5.4xlarge', …), 'GPU+HOST'
 * ('rtx4090+ryzen9-7950x'), or a host key alone (CPU-only machine).
 */
export function hardwarePreset(name: string): HardwareProfile {
  const key = name.trim().toLowerCase();
  const m = MACHINE_PRESETS.find((x) => x.key === key);
  if (m) {
    const p = composeProfile(m.gpu, m.host, undefined, m.link);
    p.name = m.key;
    p.source.citation = `${m.citation}. ${p.source.citation}`;
    return p;
  }
  const plus = key.indexOf('+');
  if (plus > 0) return composeProfile(key.slice(0, plus), key.slice(plus + 1));
  if (findHost(key)) return composeProfile(undefined, key);
  // A GPU alone is not a machine: it needs a host. Say which two forms would take it.
  if (GPU_PRESETS.some((g) => g.key === key)) {
    throw new Error(`'${name}' is a GPU, not a machine: use this+${key} (this machine's CPU and memory with that GPU) or ${key}+HOST with a host preset (e.g. ${key}+ryzen9-7950x; see \`fulcrum presets\`)`);
  }
  throw new Error(`unknown hardware preset '${name}': use a machine (${MACHINE_PRESETS.map((x) => x.key).join(', ')}), GPU+HOST, or a host alone (see \`fulcrum presets\`)`);
}
