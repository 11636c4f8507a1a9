# Runs one fuzz harness for a bounded time: cmake -DFUZZER=bin -DSEEDS=dir -DWORK=dir
# -DRUNS=n -DSECONDS=s -P run_fuzz.cmake. New inputs go to a fresh WORK/corpus, so runs do not
# grow the seed corpus; a crashing input is kept in WORK/artifacts and named in the failure.
if(NOT EXISTS ${FUZZER})
  message(FATAL_ERROR "${FUZZER} was not built")
endif()
file(REMOVE_RECURSE ${WORK}/corpus)
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
set(corpora ${WORK}/corpus)
if(EXISTS ${SEEDS})
  list(APPEND corpora ${SEEDS})
endif()
execute_process(
  COMMAND ${FUZZER} -runs=${RUNS} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
          -print_final_stats=1 -artifact_prefix=${WORK}/artifacts/ ${corpora}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}); the crashing input is in ${WORK}/artifacts")
endif()
