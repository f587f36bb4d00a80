add_executable(bench_plan bench_plan.cpp)
epo_target_options(bench_plan)
target_link_libraries(bench_plan PRIVATE epo_bench_harness epo::planner)
