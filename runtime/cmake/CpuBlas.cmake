# The CPU's matrix products: oneDNN's sgemm (Debian's libdnnl-dev) or
# OpenBLAS's CBLAS. Used by runtime/CMakeLists.txt and by the installed
# package's megrtConfig.cmake, so that both find the same library.
#
# megrt_find_cpu_blas(CHOICE) takes MEGRT_CPU_BLAS (AUTO: oneDNN when found,
# else OpenBLAS; ONEDNN; OPENBLAS; OFF; ON means AUTO), sets
# MEGRT_CPU_BLAS_LIBRARY to ONEDNN, OPENBLAS or OFF in the caller and, but
# for OFF, defines the imported target megrt_cpu_blas to link.
function(megrt_find_cpu_blas choice)
  string(TOUPPER "${choice}" choice)
  if(choice STREQUAL "ON")
    set(choice AUTO)
  endif()
  if(NOT choice MATCHES "^(AUTO|ONEDNN|OPENBLAS|OFF)$")
    message(FATAL_ERROR "MEGRT_CPU_BLAS is '${choice}'; expected AUTO, "
                        "ONEDNN, OPENBLAS or OFF")
  endif()
  set(found OFF)
  if(choice MATCHES "^(AUTO|ONEDNN)$")
    find_path(MEGRT_ONEDNN_INCLUDE_DIR oneapi/dnnl/dnnl.h
              DOC "oneDNN's headers (libdnnl-dev)")
    find_library(MEGRT_ONEDNN_LIBRARY NAMES dnnl DOC "oneDNN (libdnnl)")
    if(MEGRT_ONEDNN_INCLUDE_DIR AND MEGRT_ONEDNN_LIBRARY)
      add_library(megrt_cpu_blas INTERFACE IMPORTED GLOBAL)
      target_include_directories(megrt_cpu_blas
                                 INTERFACE ${MEGRT_ONEDNN_INCLUDE_DIR})
      target_link_libraries(megrt_cpu_blas INTERFACE ${MEGRT_ONEDNN_LIBRARY})
      set(found ONEDNN)
    elseif(choice STREQUAL "ONEDNN")
      message(FATAL_ERROR "MEGRT_CPU_BLAS=ONEDNN, but oneDNN was not found "
              "(headers: ${MEGRT_ONEDNN_INCLUDE_DIR}, library: "
              "${MEGRT_ONEDNN_LIBRARY}): install libdnnl-dev "
              "(scripts/setup.sh), or set MEGRT_ONEDNN_INCLUDE_DIR and "
              "MEGRT_ONEDNN_LIBRARY")
    endif()
  endif()
  if(found STREQUAL "OFF" AND choice MATCHES "^(AUTO|OPENBLAS)$")
    # The CPU backend calls CBLAS with OpenBLAS's integer type (blasint).
    if(NOT DEFINED BLA_VENDOR)
      set(BLA_VENDOR OpenBLAS)
    endif()
    find_package(BLAS REQUIRED)
    add_library(megrt_cpu_blas INTERFACE IMPORTED GLOBAL)
    target_link_libraries(megrt_cpu_blas INTERFACE BLAS::BLAS)
    set(found OPENBLAS)
  endif()
  set(MEGRT_CPU_BLAS_LIBRARY ${found} PARENT_SCOPE)
endfunction()
