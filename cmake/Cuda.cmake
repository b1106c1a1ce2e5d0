# The CUDA backend is compiled in when nvcc is found (or FOLDSERVE_CUDA=ON).
set(FOLDSERVE_WITH_CUDA OFF)
if(NOT FOLDSERVE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(FOLDSERVE_WITH_CUDA ON)
    endif()
  endif()
  if(FOLDSERVE_CUDA STREQUAL "ON" AND NOT FOLDSERVE_WITH_CUDA)
    message(FATAL_ERROR "FOLDSERVE_CUDA=ON but no CUDA toolkit was found")
  endif()
endif()
message(STATUS "foldserve CUDA backend: ${FOLDSERVE_WITH_CUDA}")

# Compile settings of a target holding .cu files: Hopper machine code (sm_90a), C++17 device code, and the project's warning
# flags passed to nvcc's host compiler instead of nvcc itself.
# Machine code targets: Hopper (sm_90a). Other targets compile, but the GEMMs (wgmma, bulk tensor copies) and the
# sampler (thread-block clusters) trap there.
set(FOLDSERVE_CUDA_ARCHS "90a-real" CACHE STRING "CUDA architectures of the kernels")
function(foldserve_cuda_target target)
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${FOLDSERVE_CUDA_ARCHS}" CUDA_STANDARD 17
                        CUDA_STANDARD_REQUIRED ON)
  get_target_property(options ${target} COMPILE_OPTIONS)
  if(options)
    set(cxx_options)
    foreach(option ${options})
      list(APPEND cxx_options "$<$<COMPILE_LANGUAGE:CXX>:${option}>")
    endforeach()
    set_target_properties(${target} PROPERTIES COMPILE_OPTIONS "${cxx_options}")
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wno-unused-parameter>)
endfunction()
