// fuzz/safetensors_fuzz.cpp - libFuzzer target: read_safetensors on the raw input (in memory).
//
// A file the reader accepts must also survive a round trip: writing what was read and reading it
// back must succeed and serialise to the same bytes again (write(read(write(read(x)))) ==
// write(read(x))); a failure there is reported as a finding.
#include <cstdint>
#include <string>
#include <string_view>

#include "aether/io/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  aether::SafetensorsContents contents;
  try {
    contents = aether::read_safetensors(bytes, "fuzz.safetensors");
  } catch (const aether::Error&) {
    return 0;  // the correct answer to a bad file
  }
  std::string once, twice;
  try {
    once = aether::write_safetensors(contents.tensors, contents.metadata);
    const aether::SafetensorsContents again = aether::read_safetensors(once, "round-trip");
    twice = aether::write_safetensors(again.tensors, again.metadata);
  } catch (const aether::Error& e) {
    aether::fuzz::finding(std::string("an accepted file does not round-trip: ") + e.what());
  }
  if (once != twice) aether::fuzz::finding("an accepted file serialises differently after a round trip");
  return 0;
}
