# bench_kernels: every kernel of kernels/ against its bound on the GPU (CUDA builds only).
if(EPO_WITH_CUDA)
  add_executable(bench_kernels
    bench_kernels.cpp
    bench_kernels_util.cpp
    bench_kernels_compute.cpp
    bench_kernels_flex.cpp
    bench_kernels_flex_world.cpp
    bench_kernels_flex_nvlink.cpp
    bench_kernels_device.cu)
  epo_target_options(bench_kernels)
  target_link_libraries(bench_kernels PRIVATE epo_bench_harness epo::kernels epo::model CUDA::cudart CUDA::cublas)
  target_compile_definitions(bench_kernels PRIVATE EPO_GIT_REVISION="${EPO_GIT_REVISION}")
endif()
