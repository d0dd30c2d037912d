// Q8_1 / Q8_K activation quantizers compiled for avx2 (body in q8_act_simd.h).
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/q8_act_simd.h"
