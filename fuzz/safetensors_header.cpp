// libFuzzer: the safetensors header parser on arbitrary bytes must return or throw fs::Error, never crash.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    fs::parse_safetensors_header(data, size, "fuzz");
  } catch (const fs::Error&) {
  }
  return 0;
}
