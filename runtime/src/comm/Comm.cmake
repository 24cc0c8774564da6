# The communicators (src/comm): compiled once into an object library that
# goes into megrt and, with the few megrt sources it needs, into the comm
# tests, which so build without the rest of megrt. MPI is a plugin,
# libmegrt_mpi.so, that megrt loads at run time for a world of more than
# one rank: megrt itself never links MPI. Included by runtime/CMakeLists.txt
# after the megrt target.
set(MEGRT_COMM_DIR ${CMAKE_CURRENT_LIST_DIR})

add_library(megrt_comm OBJECT
  ${MEGRT_COMM_DIR}/Collective.cpp
  ${MEGRT_COMM_DIR}/Communicator.cpp
  ${MEGRT_COMM_DIR}/LaunchEnvironment.cpp
  ${MEGRT_COMM_DIR}/MpiPluginLoader.cpp
  ${MEGRT_COMM_DIR}/PeerWatch.cpp
  ${MEGRT_COMM_DIR}/RuntimeWorld.cpp
  ${MEGRT_COMM_DIR}/SingleProcessWorld.cpp)
target_include_directories(megrt_comm PRIVATE
  ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
set_target_properties(megrt_comm PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_compile_options(megrt_comm PRIVATE ${MEGRT_WARNINGS})
target_compile_definitions(megrt_comm PRIVATE
  MEGRT_WITH_CUDA=$<BOOL:${MEGRT_WITH_CUDA}>)
# CUDA groups are NCCL's, loaded with dlopen like the driver: headers only
# (nccl.h, in the toolkit's include directory or MEGRT_NCCL_INCLUDE_DIR),
# never libnccl or libcuda. Without nccl.h the build has no CUDA groups and
# says so when one is asked for.
if(MEGRT_WITH_CUDA)
  find_path(MEGRT_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            DOC "Directory of nccl.h (NCCL's header) for the CUDA groups")
  if(NOT MEGRT_NCCL_INCLUDE_DIR)
    message(STATUS "megrt: no nccl.h found (set MEGRT_NCCL_INCLUDE_DIR): "
                   "CUDA devices run programs without collectives only")
  endif()
endif()
if(MEGRT_WITH_CUDA AND MEGRT_NCCL_INCLUDE_DIR)
  target_sources(megrt_comm PRIVATE
    ${MEGRT_COMM_DIR}/nccl/NcclGroup.cpp
    ${MEGRT_COMM_DIR}/nccl/NcclGroups.cpp
    ${MEGRT_COMM_DIR}/nccl/NcclLibrary.cpp)
  target_include_directories(megrt_comm SYSTEM PRIVATE
    ${CUDAToolkit_INCLUDE_DIRS} ${MEGRT_NCCL_INCLUDE_DIR})
else()
  target_sources(megrt_comm PRIVATE ${MEGRT_COMM_DIR}/NoCudaGroups.cpp)
endif()
target_sources(megrt PRIVATE $<TARGET_OBJECTS:megrt_comm>)

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  message(STATUS "megrt: MPI plugin ON (MPI ${MPI_C_VERSION})")
  add_library(megrt_mpi MODULE
    ${MEGRT_COMM_DIR}/mpi/MpiGroup.cpp
    ${MEGRT_COMM_DIR}/mpi/MpiProcess.cpp
    ${MEGRT_COMM_DIR}/mpi/MpiTypes.cpp
    ${MEGRT_COMM_DIR}/mpi/MpiWorld.cpp
    ${MEGRT_COMM_DIR}/mpi/PluginEntry.cpp
    # The few megrt sources the plugin needs, compiled in: it is loaded into
    # programs whose megrt is static and exports nothing.
    ${MEGRT_COMM_DIR}/Collective.cpp
    ${MEGRT_COMM_DIR}/PeerWatch.cpp
    ${PROJECT_SOURCE_DIR}/src/DType.cpp
    ${PROJECT_SOURCE_DIR}/src/HalfFloat.cpp)
  target_include_directories(megrt_mpi PRIVATE
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  # MPI's C API from C++: without these, mpi.h pulls in the deprecated C++
  # bindings, whose symbols live in a library MPI::MPI_C does not link.
  target_link_libraries(megrt_mpi PRIVATE MPI::MPI_C)
  target_compile_definitions(megrt_mpi PRIVATE OMPI_SKIP_MPICXX
                             MPICH_SKIP_MPICXX)
  # Only the factory is exported (PluginEntry.cpp), so the plugin's copies
  # of megrt functions never interpose on the program's.
  set_target_properties(megrt_mpi PROPERTIES
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_compile_options(megrt_mpi PRIVATE ${MEGRT_WARNINGS})
  install(TARGETS megrt_mpi EXPORT megrtTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

  # Where megrt looks for the plugin when MEGRT_MPI_PLUGIN is not set: the
  # build tree first, so that tests use the plugin built with them.
  set_property(SOURCE ${MEGRT_COMM_DIR}/MpiPluginLoader.cpp
    TARGET_DIRECTORY megrt_comm APPEND PROPERTY COMPILE_DEFINITIONS
    MEGRT_MPI_PLUGIN_BUILD_PATH="$<TARGET_FILE:megrt_mpi>"
    MEGRT_MPI_PLUGIN_INSTALL_PATH="${CMAKE_INSTALL_FULL_LIBDIR}/$<TARGET_FILE_NAME:megrt_mpi>")
  add_dependencies(megrt megrt_mpi)
else()
  message(STATUS "megrt: MPI plugin OFF (no MPI found): worlds of more than "
                 "one rank cannot be connected")
endif()
