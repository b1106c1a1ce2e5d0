// deltanet_chunked.cu compiled for the emulated tests.
#include "backends/cuda/kernels/deltanet_chunked.cu"
