// attention.cu compiled for the emulated tests.
#include "backends/cuda/kernels/attention.cu"
