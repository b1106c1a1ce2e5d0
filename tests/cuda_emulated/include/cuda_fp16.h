#pragma once
// The emulation's f16 type comes from tests/cuda_emulated/emulated_cuda.h.
