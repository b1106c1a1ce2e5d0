// gated_attention.cu compiled for the emulated tests.
#include "backends/cuda/kernels/gated_attention.cu"
