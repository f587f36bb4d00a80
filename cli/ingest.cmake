# Readers of users' files (--mlm-args, --bridge-overrides), epo check-log and epo diff.
list(APPEND EPO_CLI_SOURCES ingest_flags.cpp check_log.cpp cmd_check_log.cpp cmd_diff.cpp)
list(APPEND EPO_CLI_LIBS epo::ingest)
