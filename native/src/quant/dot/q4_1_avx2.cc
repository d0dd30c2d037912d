// Q4_1 kernels compiled for avx2 (body in q4_1_simd.h).
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/q4_1_simd.h"
