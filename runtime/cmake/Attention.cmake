# Fused attention's CUDA kernels: src/cuda/attention/FlashAttention.cu is
# compiled by nvcc into a fatbin (sm_90 SASS and compute_90 PTX) that is
# embedded in megrt and loaded through the driver API, so the runtime links
# neither libcudart nor libcuda. Without nvcc the runtime is built without
# them, and CudaAttention says so at run time. Included by
# runtime/CMakeLists.txt after the megrt target.
set(MEGRT_ATTENTION_FATBIN OFF)
if(MEGRT_WITH_CUDA)
  find_program(MEGRT_NVCC nvcc
    HINTS ${CUDAToolkit_BIN_DIR} ENV CUDA_HOME
    PATH_SUFFIXES bin
    PATHS /usr/local/cuda/bin
    DOC "nvcc, which compiles the fused-attention kernels")
  if(MEGRT_NVCC)
    set(MEGRT_ATTENTION_FATBIN ON)
  else()
    message(STATUS "megrt: no nvcc (looked in CUDA_HOME and "
                   "/usr/local/cuda/bin): fused attention on CUDA is left out")
  endif()
endif()

if(MEGRT_ATTENTION_FATBIN)
  get_filename_component(attention_src ${CMAKE_CURRENT_LIST_DIR}/../src
                         ABSOLUTE)
  set(attention_dir ${attention_src}/cuda/attention)
  set(attention_fatbin ${CMAKE_CURRENT_BINARY_DIR}/FlashAttention.fatbin)
  set(attention_embedded ${CMAKE_CURRENT_BINARY_DIR}/FlashAttentionFatbin.cpp)
  # Two -gencode flags rather than code=[sm_90,compute_90], whose brackets a
  # shell would read as a glob.
  add_custom_command(
    OUTPUT ${attention_fatbin}
    COMMAND ${MEGRT_NVCC} -std=c++17 -O3 --fatbin
            -gencode=arch=compute_90,code=sm_90
            -gencode=arch=compute_90,code=compute_90
            -Xptxas=-warn-spills,-warn-lmem-usage
            -ccbin ${CMAKE_CXX_COMPILER} -I${attention_src}
            ${attention_dir}/FlashAttention.cu -o ${attention_fatbin}
    DEPENDS ${attention_dir}/FlashAttention.cu
            ${attention_dir}/FlashAttentionKernels.cuh
            ${attention_dir}/FlashAttentionParams.h
    COMMENT "Compiling the flash-attention kernels with nvcc (sm_90)"
    VERBATIM)
  add_custom_command(
    OUTPUT ${attention_embedded}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${attention_fatbin}
            -DOUTPUT=${attention_embedded}
            -P ${attention_dir}/EmbedFatbin.cmake
    DEPENDS ${attention_fatbin} ${attention_dir}/EmbedFatbin.cmake
    COMMENT "Embedding the flash-attention fatbin"
    VERBATIM)
  target_sources(megrt PRIVATE ${attention_embedded})
endif()
target_compile_definitions(megrt PRIVATE
  MEGRT_ATTENTION_FATBIN=$<BOOL:${MEGRT_ATTENTION_FATBIN}>)
