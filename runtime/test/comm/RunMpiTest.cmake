# Runs a test program under mpirun and checks what every rank reported,
# since mpirun can exit 0 when ranks never ran ("not enough slots"):
#   cmake -DMPIEXEC=... -DNUMPROC_FLAG=-n -DRANKS=4 -DPROGRAM=... [-DARGS=...]
#         [-DTIMEOUT=seconds for MEGRT_COMM_TIMEOUT] [-DMODE=pass|abort]
#         [-DMAX_SECONDS=...] -P RunMpiTest.cmake
# pass:  mpirun exits 0 and every rank printed "rank R of RANKS: N passed,
#        0 failed" with N > 0.
# abort: rank 0 passed, then aborted the job at exit ("aborting the MPI job
#        at exit"), which ended the stalled ranks within MAX_SECONDS.
foreach(required MPIEXEC NUMPROC_FLAG RANKS PROGRAM)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "RunMpiTest.cmake: -D${required}=... is required")
  endif()
endforeach()
if(NOT DEFINED MODE)
  set(MODE pass)
endif()

set(flags)
execute_process(COMMAND ${MPIEXEC} --version OUTPUT_VARIABLE version
                ERROR_QUIET)
if(version MATCHES "Open MPI|OpenRTE")
  # More ranks than cores; and Open MPI refuses root without the flag.
  list(APPEND flags --oversubscribe)
  execute_process(COMMAND id -u OUTPUT_VARIABLE uid
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(uid STREQUAL "0")
    list(APPEND flags --allow-run-as-root)
  endif()
endif()
if(DEFINED TIMEOUT)
  set(ENV{MEGRT_COMM_TIMEOUT} ${TIMEOUT})
endif()
separate_arguments(ARGS)

string(TIMESTAMP started "%s")
execute_process(
  COMMAND ${MPIEXEC} ${NUMPROC_FLAG} ${RANKS} ${flags} ${PROGRAM} ${ARGS}
  OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE result
  TIMEOUT 600)
string(TIMESTAMP finished "%s")
math(EXPR seconds "${finished} - ${started}")
message("${output}${errors}")
message("-- mpirun exited with ${result} after ${seconds} s")

function(expect_rank rank)
  if(NOT output MATCHES
     "megrt-comm-mpi-tests: rank ${rank} of ${RANKS}: [1-9][0-9]* passed, 0 failed")
    message(FATAL_ERROR "rank ${rank} of ${RANKS} did not report passing "
                        "tests (did it run?)")
  endif()
endfunction()

if(MODE STREQUAL "pass")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "mpirun failed: ${result}")
  endif()
  math(EXPR last "${RANKS} - 1")
  foreach(rank RANGE ${last})
    expect_rank(${rank})
  endforeach()
elseif(MODE STREQUAL "abort")
  expect_rank(0)
  if(NOT "${output}${errors}" MATCHES "megrt: rank 0: [^\n]*aborting the MPI job at exit")
    message(FATAL_ERROR "rank 0 did not abort the MPI job at exit")
  endif()
  if(result EQUAL 0)
    message(FATAL_ERROR "mpirun exited 0 after an abort")
  endif()
  if(DEFINED MAX_SECONDS AND seconds GREATER MAX_SECONDS)
    message(FATAL_ERROR "the job took ${seconds} s, more than ${MAX_SECONDS} "
                        "s: the stalled ranks were not ended by the abort")
  endif()
else()
  message(FATAL_ERROR "RunMpiTest.cmake: unknown MODE '${MODE}'")
endif()
