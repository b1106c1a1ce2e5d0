// deltanet_normalize.cu compiled for the emulated tests.
#include "backends/cuda/kernels/deltanet_normalize.cu"
