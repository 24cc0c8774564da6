# The runtime's own CUDA kernels (fused attention, the embedding gradient):
# each .cu file under src/cuda is compiled by nvcc into a fatbin (sm_90 SASS
# and compute_90 PTX) that is embedded in megrt and loaded through the driver
# API, so the runtime links neither libcudart nor libcuda. Without nvcc the
# runtime is built without them, and the classes that launch them say so at
# run time. Included by runtime/CMakeLists.txt after the megrt target.
set(MEGRT_CUDA_FATBINS OFF)
if(MEGRT_WITH_CUDA)
  find_program(MEGRT_NVCC nvcc
    HINTS ${CUDAToolkit_BIN_DIR} ENV CUDA_HOME
    PATH_SUFFIXES bin
    PATHS /usr/local/cuda/bin
    DOC "nvcc, which compiles the runtime's own CUDA kernels")
  if(MEGRT_NVCC)
    set(MEGRT_CUDA_FATBINS ON)
  else()
    message(STATUS "megrt: no nvcc (looked in CUDA_HOME and /usr/local/cuda/"
                   "bin): the runtime's own CUDA kernels (fused attention, "
                   "the embedding gradient) are left out")
  endif()
endif()

get_filename_component(megrt_src ${CMAKE_CURRENT_LIST_DIR}/../src ABSOLUTE)

# Compiles src/cuda/SOURCE (which includes DEPENDS, relative to src/cuda)
# and embeds the fatbin in megrt as megrt::SYMBOL and megrt::SYMBOLSize.
function(megrt_embed_fatbin SYMBOL SOURCE)
  set(sources ${megrt_src}/cuda/${SOURCE})
  foreach(header ${ARGN})
    list(APPEND sources ${megrt_src}/cuda/${header})
  endforeach()
  get_filename_component(stem ${SOURCE} NAME_WE)
  set(fatbin ${CMAKE_CURRENT_BINARY_DIR}/${stem}.fatbin)
  set(embedded ${CMAKE_CURRENT_BINARY_DIR}/${stem}Fatbin.cpp)
  # Two -gencode flags rather than code=[sm_90,compute_90], whose brackets a
  # shell would read as a glob.
  add_custom_command(
    OUTPUT ${fatbin}
    COMMAND ${MEGRT_NVCC} -std=c++17 -O3 --fatbin
            -gencode=arch=compute_90,code=sm_90
            -gencode=arch=compute_90,code=compute_90
            -Xptxas=-warn-spills,-warn-lmem-usage
            -ccbin ${CMAKE_CXX_COMPILER} -I${megrt_src}
            ${megrt_src}/cuda/${SOURCE} -o ${fatbin}
    DEPENDS ${sources}
    COMMENT "Compiling ${SOURCE} with nvcc (sm_90)"
    VERBATIM)
  add_custom_command(
    OUTPUT ${embedded}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${fatbin} -DOUTPUT=${embedded}
            -DSYMBOL=${SYMBOL}
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/EmbedFatbin.cmake
    DEPENDS ${fatbin} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/EmbedFatbin.cmake
    COMMENT "Embedding ${stem}.fatbin"
    VERBATIM)
  target_sources(megrt PRIVATE ${embedded})
endfunction()

if(MEGRT_CUDA_FATBINS)
  megrt_embed_fatbin(kFlashAttentionFatbin attention/FlashAttention.cu
                     attention/FlashAttentionKernels.cuh
                     attention/FlashAttentionParams.h)
  megrt_embed_fatbin(kEmbeddingGradFatbin embedding/EmbeddingGrad.cu
                     embedding/EmbeddingGradParams.h)
endif()
target_compile_definitions(megrt PRIVATE
  MEGRT_CUDA_FATBINS=$<BOOL:${MEGRT_CUDA_FATBINS}>)
