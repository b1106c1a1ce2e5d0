#include "hub/hub_answers.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace fs::hub {
namespace {

std::string header(const HttpReply& r, const std::string& name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? "" : it->second;
}

// The hub's own explanation, when it sent one.
std::string hub_says(const HttpReply& r) {
  std::string m = header(r, "x-error-message");
  return m.empty() ? "" : " (the hub says: " + m + ")";
}

}  // namespace

void check_hub_reply(const HttpReply& r, const HubRequestContext& c, const std::string& file, bool redirect_ok) {
  const std::string subject = file.empty() ? c.repo_id : file + " of " + c.repo_id;
  switch (r.failure) {
    case TransferFailure::none:
      break;
    case TransferFailure::unreachable:
      throw Error("cannot reach " + c.endpoint + ": " + r.failure_text +
                  " (no network? a hub mirror can be set with HF_ENDPOINT)");
    case TransferFailure::connection_lost:
      throw Error("the connection to " + c.endpoint + " dropped while fetching " + subject + ": " + r.failure_text +
                  "; run the same command again to resume");
    case TransferFailure::write_failed:
      throw Error(std::string(r.write_errno == ENOSPC ? "disk full" : "cannot write") + " while downloading " +
                  subject + ": " + std::strerror(r.write_errno) +
                  (r.write_errno == ENOSPC ? "; free some space and run the same command again to resume" : ""));
    case TransferFailure::other:
      throw Error("fetching " + subject + " from " + c.endpoint + " failed: " + r.failure_text);
  }
  if (r.status >= 200 && r.status < 300) return;
  if (redirect_ok && r.status >= 300 && r.status < 400) return;
  const std::string code = header(r, "x-error-code");
  if (r.status == 401)
    throw Error(c.endpoint + " answered 401 Unauthorized for " + subject + ": " +
                (c.has_token ? "the model does not exist, or HF_TOKEN is not accepted for it"
                             : "the model does not exist, or it is private or gated and needs an access token: "
                               "set HF_TOKEN (tokens are made at " + c.endpoint + "/settings/tokens)") +
                hub_says(r));
  if (r.status == 403)
    throw Error(c.repo_id + " is gated or restricted and " +
                (c.has_token ? std::string("this token has no access to it") : "no HF_TOKEN was given") +
                ": request access at " + c.endpoint + "/" + c.repo_id + " and set HF_TOKEN" + hub_says(r));
  if (r.status == 404) {
    if (code == "RevisionNotFound")
      throw Error("revision '" + c.revision + "' of " + c.repo_id + " not found on " + c.endpoint);
    if (!file.empty() && code != "RepoNotFound")
      throw Error(file + " not found in " + c.repo_id + " on " + c.endpoint);
    throw Error("model " + c.repo_id + " not found on " + c.endpoint + " (check the ORG/NAME spelling)");
  }
  throw Error(c.endpoint + " answered HTTP " + std::to_string(r.status) + " for " + subject + hub_says(r));
}

}  // namespace fs::hub
