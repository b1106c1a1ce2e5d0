#pragma once
// The emulation's runtime types come from tests/cuda_emulated/emulated_cuda.h.
