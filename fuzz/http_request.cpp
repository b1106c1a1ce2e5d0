// Fuzzes the HTTP body parsers and validators (chat and text completions) and the reply splitter: any bytes must
// give a request or an ApiError, never a crash, a hang or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/api_request.h"
#include "server/reply_splitter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  fs::server::ParseLimits limits;
  limits.served_model = "fortune-demo";
  limits.vocab_size = 8192;
  auto chat = fs::server::parse_chat_request(body, limits);
  if (auto* r = std::get_if<fs::server::ChatRequest>(&chat)) {
    fs::GenerationConfig defaults;
    (void)fs::server::resolve_sampling(r->gen, defaults);
    (void)r->messages.dump();
  } else {
    (void)std::get<fs::server::ApiError>(chat).body();
  }
  auto completion = fs::server::parse_completion_request(body, limits);
  if (auto* e = std::get_if<fs::server::ApiError>(&completion)) (void)e->body();
  // The same bytes as a model's reply, fed in uneven pieces.
  fs::server::ReplySplitter splitter(size % 2 == 1, true);
  for (size_t i = 0; i < size; i += 1 + i % 7) (void)splitter.push(body.substr(i, 1 + i % 7));
  (void)splitter.finish();
  return 0;
}
