# The communicators (src/comm): compiled once into an object library that
# goes into megrt and, with the few megrt sources it needs, into the comm
# tests, which so build without the rest of megrt. Included by
# runtime/CMakeLists.txt after the megrt target.
set(MEGRT_COMM_DIR ${CMAKE_CURRENT_LIST_DIR})

add_library(megrt_comm OBJECT
  ${MEGRT_COMM_DIR}/Collective.cpp
  ${MEGRT_COMM_DIR}/Communicator.cpp
  ${MEGRT_COMM_DIR}/LaunchEnvironment.cpp
  ${MEGRT_COMM_DIR}/SingleProcessWorld.cpp)
target_include_directories(megrt_comm PRIVATE
  ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
set_target_properties(megrt_comm PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_compile_options(megrt_comm PRIVATE ${MEGRT_WARNINGS})
target_compile_definitions(megrt_comm PRIVATE
  MEGRT_WITH_CUDA=$<BOOL:${MEGRT_WITH_CUDA}>)
target_sources(megrt PRIVATE $<TARGET_OBJECTS:megrt_comm>)
