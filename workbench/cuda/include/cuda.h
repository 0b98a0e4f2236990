// CPU-engine stand-in for <cuda.h>: device code only needs the prelude.
#pragma once
#include "wb_cuda.h"
