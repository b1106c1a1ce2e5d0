#pragma once
// The emulation's bf16 types come from tests/cuda_emulated/emulated_cuda.h.
