# NCCL lives under the CUDA prefix on some machines and in the system library path on others.
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  message(FATAL_ERROR "NCCL not found (looked under ${CUDAToolkit_LIBRARY_DIR} and the system paths); "
                      "install libnccl-dev or configure with -DEPO_WITH_CUDA=OFF")
endif()
add_library(epo_nccl INTERFACE)
target_include_directories(epo_nccl INTERFACE ${NCCL_INCLUDE_DIR})
target_link_libraries(epo_nccl INTERFACE ${NCCL_LIBRARY})
message(STATUS "NCCL: ${NCCL_LIBRARY}")
