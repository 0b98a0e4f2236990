// CPU-engine stand-in for CUDA's <cuda_bf16.h>: __nv_bfloat16, __nv_bfloat162 and their intrinsics (wb_fp16.h).
#pragma once
#include "wb_fp16.h"
