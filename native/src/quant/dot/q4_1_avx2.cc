// Q4_1 kernels compiled for avx2 (body in q4_1_simd.h).
#define QUANT_ISA avx2
#include "quant/dot/q4_1_simd.h"
