# Compiler flags shared by every target.
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wall> $<$<COMPILE_LANGUAGE:CXX>:-Wextra> $<$<COMPILE_LANGUAGE:CXX>:-Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CXX>:-Wno-missing-field-initializers>)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  # x86-64-v3: AVX2, FMA and F16C for the CPU kernels.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=x86-64-v3>)
endif()
if(FOLDSERVE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(FOLDSERVE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FOLDSERVE_FUZZ needs clang (CC=clang CXX=clang++)")
  endif()
  # Coverage for libFuzzer in every library; the fuzz targets add the fuzzer main.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
