#pragma once
// Files in and out, checked at the edge. Inputs: a regular file (a directory, FIFO or device is
// refused by what it is), at most kMaxInputFileBytes, no NUL byte, JSON nested at most
// kMaxJsonDepth deep, each key once per object. Outputs: written whole or not at all (a temporary
// file in the same directory, then rename), checked before any work so that nothing is written
// when one of them cannot be, and never onto an input. The functions that read and write JSON
// (read_json_file, write_json_file, write_text_file) are declared in config_io.hpp.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace epo::model {

/// Largest input file read (64 MiB; measurement files of long runs are a few MiB).
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{64} << 20;
/// Deepest JSON nesting read (EPO's own files nest at most 6 deep).
inline constexpr int kMaxJsonDepth = 64;

/// The whole of a regular input file, refused (input error naming the path) when it is missing,
/// not a regular file, larger than kMaxInputFileBytes or holds a NUL byte.
std::string read_input_file(const std::string& path);

/// Parses JSON text read from `where` with the same checks as read_json_file: no NUL byte, nesting
/// at most kMaxJsonDepth, each key once per object; numbers out of double range and syntax errors
/// are input errors naming `where`.
nlohmann::json parse_json_text(const std::string& text, const std::string& where);

/// Checks output paths before any work: each one's directory exists, the path is not a directory
/// or other non-regular file, no two outputs are the same file, and no output is one of `inputs`
/// (same file by device and inode, or by name). Empty paths are skipped. Throws input errors.
void check_output_paths(const std::vector<std::string>& outputs,
                        const std::vector<std::string>& inputs);

}  // namespace epo::model
