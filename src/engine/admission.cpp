#include "engine/admission.h"

#include <algorithm>

namespace fs {

int pages_for_next_chunk(const Stream& s, ChunkRule rule, int page_tokens) {
  if (s.pending() <= 0) return 0;
  const int end = s.computed + next_chunk_length(s, rule);
  const int pages = (end + page_tokens - 1) / page_tokens;
  return pages > int(s.pages.size()) ? pages - int(s.pages.size()) : 0;
}

int pages_to_admit(const Stream& s, ChunkRule rule, int page_tokens) {
  if (!s.admitted) return pages_for_next_chunk(s, rule, page_tokens);
  const int pages = (int(s.tokens.size()) + page_tokens - 1) / page_tokens;
  return std::max(pages - int(s.pages.size()), 0);
}

int pages_to_reserve(const Stream& s, ChunkRule rule, int page_tokens, int stream_positions) {
  const int needs = pages_for_next_chunk(s, rule, page_tokens);
  const bool can_grow = int(s.pages.size()) * page_tokens < stream_positions;
  return needs > 0 || !can_grow ? needs : 1;
}

bool may_admit(int active, int parallel, int room, int reserved, int needs) {
  if (active >= parallel) return false;
  return active == 0 || needs <= room - reserved;
}

}  // namespace fs
