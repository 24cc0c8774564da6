# The communicator tests: megrt-comm-tests runs in one process; they link
# the comm objects and the megrt sources those need, not all of megrt.
add_library(megrt_comm_standalone STATIC
  $<TARGET_OBJECTS:megrt_comm>
  ${PROJECT_SOURCE_DIR}/src/DType.cpp
  ${PROJECT_SOURCE_DIR}/src/HalfFloat.cpp)
target_include_directories(megrt_comm_standalone
  PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(megrt_comm_standalone PUBLIC ${CMAKE_DL_LIBS})

add_executable(megrt-comm-tests
  ${CMAKE_CURRENT_LIST_DIR}/CollectiveTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/LaunchEnvironmentTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/SingleProcessWorldTest.cpp)
target_link_libraries(megrt-comm-tests PRIVATE megrt_comm_standalone
  GTest::gtest_main)
target_compile_options(megrt-comm-tests PRIVATE ${MEGRT_WARNINGS})
gtest_discover_tests(megrt-comm-tests)
