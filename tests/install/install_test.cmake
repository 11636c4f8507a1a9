# Run by CTest with cmake -P. Every step starts from empty directories, so a stale install
# or a stale build of the outside program cannot make the test pass.
foreach(var BUILD_DIR CONFIG WORK_DIR APP_SOURCE_DIR GENERATOR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install test: ${var} is not set")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(app_build ${WORK_DIR}/app-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "install test: ${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

if(CONFIG STREQUAL "")
  step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
else()
  step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
       --config ${CONFIG})
endif()

# The installed CLI must find the installed library by itself (its RPATH), with nothing
# from the build tree.
find_program(zc_exe zc PATHS ${prefix}/bin NO_DEFAULT_PATH REQUIRED)
step("installed zc --version" ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${zc_exe} --version)
message(STATUS "${step_output}")

set(build_type ${CONFIG})
if(build_type STREQUAL "")
  set(build_type Release)
endif()
step("configure the outside program"
     ${CMAKE_COMMAND} -S ${APP_SOURCE_DIR} -B ${app_build} -G ${GENERATOR}
     -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${build_type}
     -DCMAKE_PREFIX_PATH=${prefix})
step("build the outside program" ${CMAKE_COMMAND} --build ${app_build} --config ${build_type})

find_program(app_exe app PATHS ${app_build} ${app_build}/${build_type} NO_DEFAULT_PATH REQUIRED)
step("run the outside program" ${app_exe})
message(STATUS "${step_output}")
