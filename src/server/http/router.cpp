#include "server/http/router.h"

namespace fs::http {

void Router::add(std::string method, std::string pattern, Handler handler, bool quick) {
  routes_.push_back({std::move(method), std::move(pattern), std::move(handler), quick});
}

bool Router::matches(const std::string& pattern, const std::string& path, std::vector<std::string>& params) {
  if (!pattern.empty() && pattern.back() == '*') {
    const size_t n = pattern.size() - 1;
    if (path.size() <= n || path.compare(0, n, pattern, 0, n) != 0) return false;
    params = {path.substr(n)};
    return true;
  }
  return pattern == path;
}

Router::Match Router::find(const std::string& method, const std::string& path) const {
  Match m;
  const std::string& wanted = method == "HEAD" ? std::string("GET") : method;
  for (const Route& r : routes_) {
    std::vector<std::string> params;
    if (!matches(r.pattern, path, params)) continue;
    if (r.method == wanted) {
      m.handler = &r.handler;
      m.quick = r.quick;
      m.params = std::move(params);
      m.allow.clear();
      return m;
    }
    if (m.allow.find(r.method) == std::string::npos) m.allow += (m.allow.empty() ? "" : ", ") + r.method;
  }
  return m;
}

}  // namespace fs::http
