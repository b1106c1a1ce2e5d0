#include "server/chat_page.h"

namespace fs::server {

std::string_view chat_page_html() {
  // chat_page_html.inc is server/chat_page.html as a raw string literal, written by src/CMakeLists.txt.
  static constexpr std::string_view page =
#include "chat_page_html.inc"
      ;
  return page;
}

}  // namespace fs::server
