// Q4_0 kernels compiled for avx2 (body in q4_0_simd.h).
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/q4_0_simd.h"
