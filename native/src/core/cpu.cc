// CPU feature detection (cpuid + the OS's XSAVE state), the ISA level kernels run at, and the
// type-traits table. FULCRUM_ISA=scalar|avx2|avx512 caps the level (for tests and comparisons).
#include "ggml_types.h"

#include <cpuid.h>
#include <cstdlib>
#include <cstring>
#include <mutex>

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
    f.avx512bw = (l7.b >> 30) & 1;
    f.avx512vl = (l7.b >> 31) & 1;
    f.avx512vnni = (l7.c >> 11) & 1;
    f.avx512bf16 = (l7s1.a >> 5) & 1;
  }
  if (os_amx) {
    f.amx_bf16 = (l7.d >> 22) & 1;
    f.amx_int8 = (l7.d >> 25) & 1;
  }
  // The AVX-512 kernels are compiled with F/BW/VL/DQ/VNNI/BF16 together; DQ is checked here.
  const bool dq = (l7.b >> 17) & 1;
  const bool avx512_usable = f.avx512f && f.avx512bw && f.avx512vl && dq && f.avx512vnni && f.avx512bf16 &&
                             f.avx2 && f.fma && f.f16c;
  const bool avx2_usable = f.avx2 && f.fma && f.f16c;

  const char* cap = std::getenv("FULCRUM_ISA");
  int level = avx512_usable ? 2 : avx2_usable ? 1 : 0;
  if (cap) {
    if (std::strcmp(cap, "scalar") == 0 && level > 0) level = 0;
    else if (std::strcmp(cap, "avx2") == 0 && level > 1) level = 1;
  }
  if (level < 2) {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512vnni = f.avx512bf16 = false;
    f.amx_int8 = f.amx_bf16 = false;
  }
  if (!avx512_usable) {  // partial AVX-512 is treated as none: the kernels need the whole set
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512vnni = f.avx512bf16 = false;
  }
  if (level < 1) {
    f.avx2 = f.fma = f.f16c = f.avx_vnni = false;
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* isa_level() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f) return "avx512";
  if (f.avx2) return "avx2";
  return "scalar";
}

const TypeTraits& type_traits(GgmlType t) {
  static TypeTraits table[static_cast<int>(GgmlType::COUNT)];
  static std::once_flag once;
  std::call_once(once, [] {
    register_float_types(table, cpu_features());
    register_quant_types(table, cpu_features());
  });
  const int i = static_cast<int>(t);
  static const TypeTraits none{};
  if (i < 0 || i >= static_cast<int>(GgmlType::COUNT)) return none;
  return table[i];
}

}  // namespace fulcrum
