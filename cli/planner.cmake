# validate and plan share the validation-context flags.
list(APPEND EPO_CLI_SOURCES planner_flags.cpp)
