// ISA-specific versions of row operations in ops.cc (ops_<isa>.cc); ops.cc picks one at run time.
#pragma once
#include <cstdint>

namespace fulcrum {

void swiglu_row_avx2(const float* gate, const float* up, float* out, int64_t n);
void swiglu_row_avx512(const float* gate, const float* up, float* out, int64_t n);

}  // namespace fulcrum
