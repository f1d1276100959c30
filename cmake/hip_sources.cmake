# Which vendor libraries a GPU source needs beyond the HIP runtime, from what it includes: the
# file itself and, transitively, every "kernels/cuda/..." header it includes (so embedding.cu,
# which reaches CUB through kernels/cuda/gpu_sort.h, needs hipCUB). A library is needed when one
# of those files includes its header:
#   hipBLASLt  <cublasLt.h>  (kernels/cuda/cublaslt_api.h: the GEMM source)
#   hipCUB     <cub/...>     (kernels/cuda/gpu_sort.h: the radix sort)
#   RCCL       <nccl.h>, <rccl/...>  (kernels/cuda/nccl_runtime.h: parallel/nccl_comm.cu)
# Used by CMakeLists.txt (MESHTRAIN_HIP) and, in script mode, by scripts/hip_compile_check.sh, so
# both leave out the same files for the same reason:
#   cmake -DMT_SOURCE_DIR=<repo> -P cmake/hip_sources.cmake
# prints one line per src/kernels/cuda/*.cu and src/parallel/nccl_comm.cu: "<path> <needs...>"
# (paths relative to the repository; no needs: the path alone).
cmake_policy(VERSION 3.25)

function(meshtrain_hip_scan_includes file src_root visited_var needs_var)
  set(visited ${${visited_var}})
  set(needs ${${needs_var}})
  if(file IN_LIST visited)
    return()
  endif()
  list(APPEND visited "${file}")
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS lines)
    if(line MATCHES "<cublasLt\\.h>")
      list(APPEND needs hipBLASLt)
    elseif(line MATCHES "<cub/")
      list(APPEND needs hipCUB)
    elseif(line MATCHES "<nccl\\.h>|<rccl/")
      list(APPEND needs RCCL)
    elseif(line MATCHES "\"(kernels/cuda/[^\"]+)\"")
      set(header "${src_root}/${CMAKE_MATCH_1}")
      if(EXISTS "${header}")
        meshtrain_hip_scan_includes("${header}" "${src_root}" visited needs)
      endif()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES needs)
  set(${visited_var} ${visited} PARENT_SCOPE)
  set(${needs_var} ${needs} PARENT_SCOPE)
endfunction()

# The libraries `source` needs (a list, possibly empty) into out_var.
function(meshtrain_hip_needs source src_root out_var)
  set(visited)
  set(needs)
  meshtrain_hip_scan_includes("${source}" "${src_root}" visited needs)
  list(SORT needs)
  set(${out_var} ${needs} PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED MT_SOURCE_DIR)
  file(GLOB sources RELATIVE "${MT_SOURCE_DIR}" "${MT_SOURCE_DIR}/src/kernels/cuda/*.cu")
  list(SORT sources)
  list(APPEND sources src/parallel/nccl_comm.cu)
  foreach(source IN LISTS sources)
    meshtrain_hip_needs("${MT_SOURCE_DIR}/${source}" "${MT_SOURCE_DIR}/src" needs)
    string(REPLACE ";" " " needs "${needs}")
    execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "${source} ${needs}")
  endforeach()
endif()
