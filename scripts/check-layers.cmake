# The layer check (docs/ARCHITECTURE.md): every `#include "<folder>/..."` in the source tree must name
# a folder of the including file's layer or a lower one. Run by CTest (`layers`) as
#   cmake -DROOT=<source dir> -P scripts/check-layers.cmake
# It prints every violation as file:line and fails when there is one.

cmake_minimum_required(VERSION 3.22)

if(NOT ROOT)
  message(FATAL_ERROR "check-layers: pass -DROOT=<source dir>")
endif()
get_filename_component(ROOT "${ROOT}" ABSOLUTE)

# Lowest first, one layer per entry, its folders separated by commas. Folders of one layer may
# include each other; a folder may include every layer below its own. Subfolders (ops/cuda,
# optim/cuda, nn/attention) belong to their folder's layer. tapestry.h, the one include for
# programs, sits with apps. tests/, bench/ and examples/ sit on top.
set(LAYERS
  "core"
  "ops"
  "nn,optim"
  "dist,data,metrics"
  "models"
  "train"
  "apps,tapestry.h"
  "tests,bench,examples")

# The justified exceptions (docs/ARCHITECTURE.md, "Exceptions"): "<file>|<included header>".
set(EXCEPTIONS
  "core/autograd.cpp|ops/creation.h"
  "core/autograd.cpp|ops/elementwise.h"
  "core/autograd.cpp|ops/reduce.h"
  "core/autograd.cpp|ops/shape.h")

set(rank 0)
set(folders)
foreach(layer IN LISTS LAYERS)
  string(REPLACE "," ";" members "${layer}")
  foreach(folder IN LISTS members)
    set(RANK_${folder} ${rank})
    list(APPEND folders ${folder})
  endforeach()
  math(EXPR rank "${rank} + 1")
endforeach()

# The layer of a path relative to ROOT ("ops/cuda/x.cu" -> ops's), or "" when it is in none.
function(layer_of path out)
  string(REGEX MATCH "^[^/]+" first "${path}")
  if(DEFINED RANK_${first})
    set(${out} ${RANK_${first}} PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

set(globs)
set(top_files)
foreach(folder IN LISTS folders)
  if(folder MATCHES "\\.h$")
    list(APPEND top_files "${ROOT}/${folder}")
  else()
    foreach(ext h cpp cu cuh)
      list(APPEND globs "${ROOT}/${folder}/*.${ext}")
    endforeach()
  endif()
endforeach()
file(GLOB_RECURSE sources RELATIVE "${ROOT}" ${globs})
file(GLOB top_sources RELATIVE "${ROOT}" ${top_files})  # not recursive: only the tree's own
list(APPEND sources ${top_sources})
list(SORT sources)
if(NOT sources)
  message(FATAL_ERROR "check-layers: no source file under ${ROOT}: is it Tapestry's source tree?")
endif()

set(violations 0)
set(checked 0)
foreach(source IN LISTS sources)
  layer_of("${source}" own)
  # One list element per line: semicolons (CMake's list separator), backslashes (which would escape
  # one) and square brackets (which would join elements) are set aside first.
  file(READ "${ROOT}/${source}" text)
  string(REPLACE "\\" "<backslash>" text "${text}")
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "[" "<open>" text "${text}")
  string(REPLACE "]" "<close>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(number 0)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
      continue()
    endif()
    set(header "${CMAKE_MATCH_1}")
    math(EXPR checked "${checked} + 1")
    layer_of("${header}" theirs)
    if(theirs STREQUAL "" OR theirs LESS_EQUAL own OR "${source}|${header}" IN_LIST EXCEPTIONS)
      continue()
    endif()
    message("${source}:${number}: includes \"${header}\", a higher layer (docs/ARCHITECTURE.md)")
    math(EXPR violations "${violations} + 1")
  endforeach()
endforeach()

list(LENGTH sources files)
if(violations GREATER 0)
  message(FATAL_ERROR "check-layers: ${violations} include(s) against the layer order in ${files} files")
endif()
message("check-layers: ${checked} includes in ${files} files follow the layer order")
