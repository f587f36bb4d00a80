# epo calibrate published: predicted against published Megatron runs.
list(APPEND EPO_CLI_SOURCES cmd_calibrate_published.cpp)
