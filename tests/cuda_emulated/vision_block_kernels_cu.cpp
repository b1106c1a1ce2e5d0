// vision_block_kernels.cu compiled for the emulated tests.
#include "backends/cuda/kernels/vision_block_kernels.cu"
