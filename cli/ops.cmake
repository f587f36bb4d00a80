# epo calibrate ops: predicted against published per-op benchmarks.
list(APPEND EPO_CLI_SOURCES cmd_calibrate_ops.cpp)
