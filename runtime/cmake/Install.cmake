# Installs megrt for embedding: the static library, the public headers and
# a CMake package, so that `find_package(megrt)` gives the imported target
# megrt::megrt with its link dependencies (libdl, and the CPU BLAS when the
# runtime has one). Included by runtime/CMakeLists.txt after the megrt
# target; a top-level project's `cmake --install` runs it too.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MEGRT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/megrt)

install(TARGETS megrt EXPORT megrtTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# ArtifactSeal.h needs the generated schema header and FlatBuffers: it is
# for artifact writers in the build tree, not for embedders. The library
# kernels' list (LibraryKernels.def) goes with the header that reads it.
install(DIRECTORY include/megrt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def"
        PATTERN "ArtifactSeal.h" EXCLUDE)
install(EXPORT megrtTargets NAMESPACE megrt::
        DESTINATION ${MEGRT_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/megrtConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/megrtConfig.cmake
  INSTALL_DESTINATION ${MEGRT_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/megrtConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/megrtConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/megrtConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/CpuBlas.cmake
        DESTINATION ${MEGRT_INSTALL_CMAKEDIR})
