#pragma once
// Turns what the hub (or the network, or the disk) answered into one clear fs::Error.
#include <string>

#include "hub/hub_http.h"

namespace fs::hub {

struct HubRequestContext {
  std::string endpoint, repo_id, revision;
  bool has_token = false;
};

// Throws unless `reply` is a 2xx (or, when `redirect_ok`, a 3xx) answer. `file` is "" for the model itself.
void check_hub_reply(const HttpReply& reply, const HubRequestContext& context, const std::string& file,
                     bool redirect_ok = false);

}  // namespace fs::hub
