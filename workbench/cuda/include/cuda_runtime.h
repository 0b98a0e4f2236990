// CPU-engine stand-in for <cuda_runtime.h>: device code only needs the prelude.
#pragma once
#include "wb_cuda.h"
