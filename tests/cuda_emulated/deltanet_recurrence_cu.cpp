// deltanet_recurrence.cu compiled for the emulated tests.
#include "backends/cuda/kernels/deltanet_recurrence.cu"
