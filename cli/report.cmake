# epo report and --html on the commands: pages from the report library.
list(APPEND EPO_CLI_SOURCES cmd_report.cpp)
list(APPEND EPO_CLI_LIBS epo::report)
