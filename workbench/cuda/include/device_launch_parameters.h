// CPU-engine stand-in for <device_launch_parameters.h>: device code only needs the prelude.
#pragma once
#include "wb_cuda.h"
