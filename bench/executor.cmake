# bench_executor: measured overlap of `epo run` against the §7 goals (CUDA builds only).
if(EPO_WITH_CUDA)
  add_executable(bench_executor bench_executor.cpp)
  epo_target_options(bench_executor)
  target_link_libraries(bench_executor PRIVATE epo_bench_harness epo::exec epo::model)
  target_compile_definitions(bench_executor PRIVATE EPO_GIT_REVISION="${EPO_GIT_REVISION}")
endif()
