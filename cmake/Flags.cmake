# Compiler flags shared by every target.
add_compile_options(-Wall -Wextra -Wno-unused-parameter)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  # x86-64-v3: AVX2, FMA and F16C for the CPU kernels.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=x86-64-v3>)
endif()
if(FOLDSERVE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
