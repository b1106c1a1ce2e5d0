#pragma once
// Routes by method and path: exact paths, or a prefix ending in '*' whose rest is captured as params[0].
// A path that matches under another method is told apart from one that matches nothing (405 vs 404).
#include <functional>
#include <string>
#include <vector>

#include "server/http/http_message.h"

namespace fs::http {

using Handler = std::function<void(const Request&, Response&)>;

class Router {
 public:
  // `quick` routes are answered on the event loop itself: they must never block.
  void add(std::string method, std::string pattern, Handler handler, bool quick = false);

  struct Match {
    const Handler* handler = nullptr;  // nullptr: no route
    bool quick = false;
    std::vector<std::string> params;
    std::string allow;  // methods the path takes, when the method was wrong
  };
  // HEAD finds GET routes.
  Match find(const std::string& method, const std::string& path) const;

 private:
  struct Route {
    std::string method, pattern;
    Handler handler;
    bool quick;
  };
  static bool matches(const std::string& pattern, const std::string& path, std::vector<std::string>& params);
  std::vector<Route> routes_;
};

}  // namespace fs::http
