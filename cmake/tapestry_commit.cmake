# Writes OUTPUT, a header defining TAPESTRY_COMMIT: `git rev-parse --short HEAD` of SOURCE_DIR, with
# "-dirty" where tracked files have uncommitted changes, "unknown" outside a checkout. Run as a
# script (cmake -DSOURCE_DIR=... -DOUTPUT=... [-DGIT_EXECUTABLE=...] -P) at every build, so that
# what the programs print and record is the commit they were built from, not the one CMake last
# configured at. The header is rewritten only when the commit changes: only its includers rebuild.
set(commit unknown)
if(GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status ERROR_QUIET)
  if(status EQUAL 0 AND head)
    set(commit ${head})
    execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                    OUTPUT_VARIABLE changes ERROR_QUIET)
    if(changes)
      string(APPEND commit -dirty)
    endif()
  endif()
endif()
set(content "#define TAPESTRY_COMMIT \"${commit}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUTPUT} "${content}")
endif()
