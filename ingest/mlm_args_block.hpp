#pragma once
// Megatron-LM's printed arguments (megatron/training/arguments.py, _print_args; the same form from
// core_v0.4 to the main branch):
//   ------------------------ arguments ------------------------
//     name ........................................ value
//   -------------------- end of arguments ---------------------
// A name shorter than 48 characters is followed by 48 - len(name) dots; a longer one by two
// blanks. Lines are found anywhere in a log (excerpts may hold windows of the block).
#include <string>
#include <vector>

#include "ingest/mlm_table.hpp"

namespace epo::ingest {

/// The arguments printed in `text`, in the order printed; where = source and line.
std::vector<ArgValue> read_arguments_block(const std::string& text, const std::string& source);

}  // namespace epo::ingest
