# Schedule builder, discrete-event simulator, timeline metrics, traces and the steady-state fast
# path; the input limits that bound them, the checked reading and writing of files, and the
# refusal of results that cannot be right (included by model/CMakeLists.txt).
list(APPEND EPO_MODEL_SCHEDULE_SOURCES
  schedule.cpp
  schedule_tables.cpp
  simulate.cpp
  simulate_prepare.cpp
  simulate_result.cpp
  simulate_step.cpp
  timeline.cpp
  fast_path.cpp
  fast_path_types.cpp
  maxplus.cpp
  trace.cpp
  limits.cpp
  json_file.cpp
  result_bounds.cpp
)
