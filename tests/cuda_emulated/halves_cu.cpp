// halves.cu compiled for the emulated tests.
#include "backends/cuda/kernels/halves.cu"
