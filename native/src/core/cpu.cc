// CPU feature detection (cpuid + the OS's XSAVE state) and the ISA levels: which level code can
// run on which CPU, and the best choice for one (capped by FULCRUM_ISA). Only detection and the
// choice live here; core/kernel_select.cc makes the choice once and installs the kernels.
#include "core/isa.h"

#include <cpuid.h>
#include <cstring>

namespace fulcrum {
namespace {

struct Regs { unsigned a = 0, b = 0, c = 0, d = 0; };

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}

unsigned long long xgetbv0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

// What the CPU and the OS support, uncapped: FULCRUM_ISA applies to the choice, not to this.
CpuFeatures detect() {
  CpuFeatures f;
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = (l1.c >> 27) & 1;
  if (!osxsave) return f;
  const unsigned long long xcr0 = xgetbv0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM + YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask + ZMM state
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;
  const Regs l7 = cpuid(7, 0);
  const Regs l7s1 = cpuid(7, 1);
  if (os_avx) {
    f.fma = (l1.c >> 12) & 1;
    f.f16c = (l1.c >> 29) & 1;
    f.avx2 = (l7.b >> 5) & 1;
    f.avx_vnni = (l7s1.a >> 4) & 1;
  }
  if (os_avx512) {
    f.avx512f = (l7.b >> 16) & 1;
    f.avx512dq = (l7.b >> 17) & 1;
    f.avx512bw = (l7.b >> 30) & 1;
    f.avx512vl = (l7.b >> 31) & 1;
    f.avx512vnni = (l7.c >> 11) & 1;
    f.avx512bf16 = (l7s1.a >> 5) & 1;
  }
  if (os_amx) {
    f.amx_bf16 = (l7.d >> 22) & 1;
    f.amx_int8 = (l7.d >> 25) & 1;
  }
  const Regs l0 = cpuid(0, 0);
  const bool amd = l0.b == 0x68747541 && l0.d == 0x69746e65 && l0.c == 0x444d4163;  // "AuthenticAMD"
  const unsigned family = ((l1.a >> 8) & 0xf) + (((l1.a >> 8) & 0xf) == 0xf ? (l1.a >> 20) & 0xff : 0);
  f.amd_zen4 = amd && family == 0x19 && f.avx512f;
  f.amd_zen5 = amd && family == 0x1A && f.avx512f;
  f.intel = l0.b == 0x756e6547 && l0.d == 0x49656e69 && l0.c == 0x6c65746e;  // "GenuineIntel"
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::AvxVnni: return "avxvnni";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

bool isa_from_name(const char* s, Isa* out) {
  for (int i = 0; i < kIsaCount; ++i) {
    if (std::strcmp(s, isa_name(static_cast<Isa>(i))) == 0) {
      *out = static_cast<Isa>(i);
      return true;
    }
  }
  return false;
}

bool isa_runs_on(Isa isa, const CpuFeatures& f) {
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return avx2;
    case Isa::AvxVnni: return avx2 && f.avx_vnni;
    case Isa::Avx512:
      return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx512bf16;
  }
  return false;
}

KernelChoice choose_kernels(const CpuFeatures& f, const char* cap) {
  KernelChoice c;
  Isa limit = Isa::Avx512;
  // An unknown FULCRUM_ISA value caps nothing. The levels are searched downwards from the cap, so
  // a CPU with AVX-512 but no AVX-VNNI (Ice Lake server) capped at avxvnni runs avx2.
  if (cap && !isa_from_name(cap, &limit)) limit = Isa::Avx512;
  for (int i = static_cast<int>(limit); i > 0; --i) {
    if (isa_runs_on(static_cast<Isa>(i), f)) {
      c.isa = static_cast<Isa>(i);
      break;
    }
  }
  c.amx_int8 = c.isa == Isa::Avx512 && f.amx_int8;
  c.gemv_prefetch = !f.amd_zen4;
  c.q5_0_gemv_prefetch = c.gemv_prefetch || (f.amd_zen4 && c.isa == Isa::Avx512);
  c.q6_k_gemv_prefetch_bytes = f.amd_zen5 ? 3072 : f.amd_zen4 || f.intel ? 1536 : 0;
  c.q6_k_gemv_prefetch_l1 = f.intel;
  c.gemv_four_streams = !f.amd_zen4;
  c.k_gemv_two_streams = f.intel;
  c.q6_k_avx2_gemv_prefetch = c.gemv_prefetch && !f.intel;
  return c;
}

}  // namespace fulcrum
