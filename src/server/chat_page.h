#pragma once
// The browser chat page served at GET / (edited as server/chat_page.html, embedded at build time).
#include <string_view>

namespace fs::server {

// The whole page: HTML with its CSS and JavaScript inline, nothing fetched from elsewhere.
std::string_view chat_page_html();

}  // namespace fs::server
