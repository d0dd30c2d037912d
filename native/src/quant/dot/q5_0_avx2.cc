// Q5_0 kernels compiled for avx2 (body in q5_0_simd.h).
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/q5_0_simd.h"
