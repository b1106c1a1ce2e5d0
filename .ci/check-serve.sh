#!/usr/bin/env bash
# The README's serve command as a user runs it: scripts/serve.sh from the clean clone in the background, wait for
# /health, ask one chat completion with curl and compare it with the reference reply, stop it with SIGTERM (exit 0).
set -euo pipefail
cd "$(dirname "$0")/.."
shared="${FOLDSERVE_SHARED:-$(pwd)/../shared}"
log="$(mktemp)"
scripts/serve.sh >"$log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 1800); do
  if curl -sf http://127.0.0.1:8888/health >/dev/null 2>&1; then break; fi
  if ! kill -0 $pid 2>/dev/null; then cat "$log"; echo "serve check: scripts/serve.sh exited before serving"; exit 1; fi
  sleep 1
done
case_json="$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["cases"][0]; print(json.dumps({"messages": [{"role": "user", "content": c["ask"]}], "temperature": 0, "max_tokens": len(c["greedy"])}))' "$shared/reference/fortune-demo/cases.json")"
reply="$(curl -sS http://127.0.0.1:8888/v1/chat/completions -H 'content-type: application/json' -d "$case_json")"
python3 - "$shared/reference/fortune-demo/cases.json" "$reply" <<'PY'
import json, sys
want = json.load(open(sys.argv[1]))["cases"][0]["reply"]
got = json.loads(sys.argv[2])["choices"][0]["message"]["content"]
if got != want:
    sys.exit(f"serve check: the reply {got!r} is not the reference {want!r}")
print("serve check: reply equals the reference")
PY
grep -q "try: curl" "$log" || { cat "$log"; echo "serve check: no ready-to-paste curl line printed"; exit 1; }
kill -TERM $pid
status=0
wait $pid || status=$?
trap - EXIT
if [ "$status" -ne 0 ]; then cat "$log"; echo "serve check: exit status $status after SIGTERM"; exit 1; fi
echo "serve check: stopped cleanly on SIGTERM"
