// foldserve pull ORG/NAME [--revision R]: downloads a model from the Hugging Face hub into its cache.
#include <cstdio>
#include <unistd.h>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "hub/hub_pull.h"

namespace fs::cli {
namespace {

int run_pull(const std::vector<std::string>& argv) {
  Args args(argv, {"revision"}, {});
  if (args.positionals().size() != 1) throw Error("usage: foldserve pull ORG/NAME [--revision R]");
  hub::PullOptions o;
  o.repo_id = args.positionals()[0];
  o.revision = args.get_or("revision", "");
  hub::PullProgress progress(stderr, ::isatty(STDERR_FILENO) == 1);
  hub::PullResult r = hub::pull_model(o, progress);
  const std::string revision = o.revision.empty() ? "" : " --revision " + o.revision;
  std::printf("%s: %d downloaded, %d already in the cache\nsnapshot: %s\nserve it with: foldserve serve %s%s\n",
              o.repo_id.c_str(), r.downloaded, r.cached, r.snapshot.c_str(), o.repo_id.c_str(), revision.c_str());
  return 0;
}

}  // namespace

FS_REGISTER_COMMAND("pull", "ORG/NAME [--revision R]: download a model from the Hugging Face hub into its cache",
                    run_pull);

}  // namespace fs::cli
