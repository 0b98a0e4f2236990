// CPU-engine stand-in for CUDA's <cuda_fp16.h>: __half, __half2 and their intrinsics (see wb_fp16.h).
#pragma once
#include "wb_fp16.h"
