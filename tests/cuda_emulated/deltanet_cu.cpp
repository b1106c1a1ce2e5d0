// deltanet.cu compiled for the emulated tests.
#include "backends/cuda/kernels/deltanet.cu"
