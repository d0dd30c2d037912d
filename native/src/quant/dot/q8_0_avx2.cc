// Q8_0 kernels compiled for avx2 (body in q8_0_simd.h, shared with the other SIMD ISA).
#define QUANT_ISA avx2
#include "quant/dot/q8_0_simd.h"
