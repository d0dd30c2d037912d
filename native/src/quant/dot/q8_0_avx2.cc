// Q8_0 kernels compiled for avx2 (body in q8_0_simd.h, shared with the other SIMD ISA).
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/q8_0_simd.h"
