// Q4_0 kernels compiled for avx2 (body in q4_0_simd.h).
#define QUANT_ISA avx2
#include "quant/dot/q4_0_simd.h"
