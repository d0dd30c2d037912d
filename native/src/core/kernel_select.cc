// The process's one kernel choice and the type-traits table it fills: kernel_choice() chooses
// once (from the CPU and FULCRUM_ISA) and runs select_kernels, which hands the choice to each
// kernel family in turn. Nothing else in the addon picks an ISA.
#include "core/isa.h"

#include <cstdlib>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/float_fns.h"

namespace fulcrum {
namespace {

TypeTraits g_table[static_cast<int>(GgmlType::COUNT)];

// Linux hands out the AMX tile state (8 KiB of XSAVE area) only to processes that ask for it;
// without it, the first tile instruction faults. Process-wide and idempotent.
bool amx_request_permission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// Whether the variable `name` is exactly "0" or "1" (into *value); any other value is ignored.
bool env_switch(const char* name, bool* value) {
  const char* e = std::getenv(name);
  if (!e || (e[0] != '0' && e[0] != '1') || e[1] != 0) return false;
  *value = e[0] == '1';
  return true;
}

KernelChoice make_choice() {
  KernelChoice c = choose_kernels(cpu_features(), std::getenv("FULCRUM_ISA"));
  bool on = false;
  if (env_switch("FULCRUM_GEMV_PREFETCH", &on)) c.gemv_prefetch = c.q5_0_gemv_prefetch = c.q6_k_avx2_gemv_prefetch = on;
  if (env_switch("FULCRUM_GEMV_PREFETCH_Q5_0", &on)) c.q5_0_gemv_prefetch = on;
  // FULCRUM_GEMV_STREAMS=4: the four-stream walks; =1: each kernel's own (one stream, mostly).
  if (const char* e = std::getenv("FULCRUM_GEMV_STREAMS"); e && (e[0] == '1' || e[0] == '4') && e[1] == 0) c.gemv_four_streams = e[0] == '4';
  if (const char* e = std::getenv("FULCRUM_GEMV_K_STREAMS"); e && (e[0] == '1' || e[0] == '2') && e[1] == 0) c.k_gemv_two_streams = e[0] == '2';
  // On: the CPU's own distance, or 1.5 KiB where it has none.
  if (env_switch("FULCRUM_GEMV_PREFETCH_Q6_K", &on)) {
    c.q6_k_gemv_prefetch_bytes = on ? (c.q6_k_gemv_prefetch_bytes ? c.q6_k_gemv_prefetch_bytes : 1536) : 0;
    c.q6_k_avx2_gemv_prefetch = on;
  }
  // Off only: AMX tiles on a CPU without AMX would fault.
  if (env_switch("FULCRUM_AMX", &on) && !on) c.amx_int8 = false;
  // Every AMX kernel (the GGUF-layout tiles, the row groups' tiles) may run only once the process
  // holds the tile state: without the kernel's grant, AMX is off.
  if (c.amx_int8 && !amx_request_permission()) c.amx_int8 = false;
  select_kernels(c, g_table);
  return c;
}

}  // namespace

void select_kernels(const KernelChoice& c, TypeTraits* table) {
  // The float primitives first: the F32/F16/BF16 rows of the table point at them.
  kernels::register_float_types(table, kernels::select_float_fns(c.isa));
  register_quant_types(table, c);
  quant::register_packed_formats(c);
  quant::register_gemm_tiles(table, c);
}

const KernelChoice& kernel_choice() {
  static const KernelChoice c = make_choice();
  return c;
}

// The levels are not a chain: a Zen 4 runs avx512 but not avxvnni (VEX vpdpbusd raises #UD
// there), so a level below the choice must also run on this CPU.
bool isa_allowed(Isa isa) {
  return static_cast<int>(isa) >= 0 && static_cast<int>(isa) <= static_cast<int>(kernel_choice().isa) &&
         isa_runs_on(isa, cpu_features());
}

const char* isa_level() { return isa_name(kernel_choice().isa); }

const TypeTraits& type_traits(GgmlType t) {
  (void)kernel_choice();
  const int i = static_cast<int>(t);
  static const TypeTraits none{};
  if (i < 0 || i >= static_cast<int>(GgmlType::COUNT)) return none;
  return g_table[i];
}

}  // namespace fulcrum
