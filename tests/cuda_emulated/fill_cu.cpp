// fill.cu compiled for the emulated tests.
#include "backends/cuda/kernels/fill.cu"
