add_executable(bench_cost bench_cost.cpp)
epo_target_options(bench_cost)
target_link_libraries(bench_cost PRIVATE epo_bench_harness epo::model)
