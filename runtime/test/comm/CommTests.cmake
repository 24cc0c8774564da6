# The communicator tests (ctest -L comm): megrt-comm-tests in one process,
# megrt-comm-mpi-tests under mpirun. Both link the comm objects and the few
# megrt sources they need rather than all of megrt.
add_library(megrt_comm_standalone STATIC
  $<TARGET_OBJECTS:megrt_comm>
  ${PROJECT_SOURCE_DIR}/src/DType.cpp
  ${PROJECT_SOURCE_DIR}/src/DynamicLibrary.cpp
  ${PROJECT_SOURCE_DIR}/src/HalfFloat.cpp)
target_include_directories(megrt_comm_standalone
  PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(megrt_comm_standalone PUBLIC ${CMAKE_DL_LIBS})
if(MEGRT_WITH_CUDA)
  target_sources(megrt_comm_standalone PRIVATE
    ${PROJECT_SOURCE_DIR}/src/cuda/CudaDriver.cpp)
  target_include_directories(megrt_comm_standalone SYSTEM
    PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
endif()

add_executable(megrt-comm-tests
  ${CMAKE_CURRENT_LIST_DIR}/CollectiveTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/LaunchEnvironmentTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/MpiPluginLoaderTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/PeerWatchTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/RuntimeWorldTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/SingleProcessWorldTest.cpp)
# The NCCL test skips, with its reason, where there is no GPU.
if(MEGRT_WITH_CUDA AND MEGRT_NCCL_INCLUDE_DIR)
  target_include_directories(megrt-comm-tests SYSTEM PRIVATE
    ${MEGRT_NCCL_INCLUDE_DIR})
  target_sources(megrt-comm-tests PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/NcclGroupTest.cpp
    ${CMAKE_CURRENT_LIST_DIR}/NcclLibraryTest.cpp)
endif()
target_compile_definitions(megrt-comm-tests PRIVATE
  MEGRT_WITH_CUDA=$<BOOL:${MEGRT_WITH_CUDA}>)
target_link_libraries(megrt-comm-tests PRIVATE megrt_comm_standalone
  GTest::gtest_main)
target_compile_options(megrt-comm-tests PRIVATE ${MEGRT_WARNINGS})
gtest_discover_tests(megrt-comm-tests PROPERTIES LABELS comm)

# Tests run by every rank under mpirun, through the MPI plugin; the test
# program itself does not link MPI, as megrt does not.
if(TARGET megrt_mpi)
  add_executable(megrt-comm-mpi-tests
    ${PROJECT_SOURCE_DIR}/test/MpiTestMain.cpp
    ${CMAKE_CURRENT_LIST_DIR}/MpiTimeoutTest.cpp
    ${CMAKE_CURRENT_LIST_DIR}/MpiWorldTest.cpp)
  # Every rank reports its own counts (RunMpiTest.cmake): a rank of the
  # timeout test stalls on purpose, so no collective may follow the tests.
  target_compile_definitions(megrt-comm-mpi-tests PRIVATE
    MEGRT_MPI_TEST_PROGRAM="megrt-comm-mpi-tests" MEGRT_MPI_TEST_GATHER=0)
  target_link_libraries(megrt-comm-mpi-tests PRIVATE megrt_comm_standalone
    GTest::gtest GTest::gmock)
  target_compile_options(megrt-comm-mpi-tests PRIVATE ${MEGRT_WARNINGS})
  add_dependencies(megrt-comm-mpi-tests megrt_mpi)
  if(MEGRT_WITH_CUDA AND MEGRT_NCCL_INCLUDE_DIR)
    target_include_directories(megrt-comm-mpi-tests SYSTEM PRIVATE
      ${MEGRT_NCCL_INCLUDE_DIR})
    target_sources(megrt-comm-mpi-tests PRIVATE
      ${CMAKE_CURRENT_LIST_DIR}/MpiNcclTest.cpp)
  endif()

  set(run_mpi_test ${CMAKE_COMMAND} -DMPIEXEC=${MPIEXEC_EXECUTABLE}
      -DNUMPROC_FLAG=${MPIEXEC_NUMPROC_FLAG}
      -DPROGRAM=$<TARGET_FILE:megrt-comm-mpi-tests>)
  # A limit well above the tests' time, so that a hang fails rather than
  # waits for ctest's timeout.
  add_test(NAME megrt-comm-mpi.4-ranks
    COMMAND ${run_mpi_test} -DRANKS=4 -DTIMEOUT=60
            "-DARGS=--gtest_filter=-MpiTimeoutTest.*"
            -P ${CMAKE_CURRENT_LIST_DIR}/RunMpiTest.cmake)
  add_test(NAME megrt-comm-mpi.2-ranks
    COMMAND ${run_mpi_test} -DRANKS=2 -DTIMEOUT=60
            "-DARGS=--gtest_filter=-MpiTimeoutTest.*"
            -P ${CMAKE_CURRENT_LIST_DIR}/RunMpiTest.cmake)
  # Rank 1 stalls for 40 s; rank 0 times out after 2 s and aborts the job.
  add_test(NAME megrt-comm-mpi.timeout
    COMMAND ${run_mpi_test} -DRANKS=2 -DTIMEOUT=2 -DMODE=abort
            -DMAX_SECONDS=25 "-DARGS=--gtest_filter=MpiTimeoutTest.*"
            -P ${CMAKE_CURRENT_LIST_DIR}/RunMpiTest.cmake)
  set_tests_properties(megrt-comm-mpi.4-ranks megrt-comm-mpi.2-ranks
    megrt-comm-mpi.timeout PROPERTIES TIMEOUT 300 PROCESSORS 2
    LABELS "comm;mpi")
endif()
