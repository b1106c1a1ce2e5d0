#pragma once
// The GPT-2 byte-level alphabet: every byte maps to one printable character and back.
#include <string>
#include <string_view>

namespace fs::text {

// Each byte of s → its byte-level character (UTF-8).
std::string bytes_to_byte_level(std::string_view s);
// Byte-level characters → bytes; false (out untouched past its old size) when a character is not in the alphabet.
bool byte_level_to_bytes(std::string_view s, std::string& out);

}  // namespace fs::text
