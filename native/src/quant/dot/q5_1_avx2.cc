// Q5_1 kernels compiled for avx2 (body in q5_1_simd.h).
#define QUANT_ISA avx2
#include "quant/dot/q5_1_simd.h"
