# Load on a running foldserve: N concurrent streamed /v1/completions, each PROMPT random token ids (below TOP_ID) and
# REPLY tokens, for PASSES passes. MODE: greedy (the model picks on the device), logprobs / top5 (greedy with the
# chosen id's logprob / 5 top ones) or penalty (temperature 0.8, top-p 0.95, presence penalty 0.5: host draws).
# Prints per pass: whole tok/s (usage tokens / wall from the first send), decode tok/s (tokens after every stream
# had its first / the time from then to the last, as bench_gpu counts), TTFT, the client's CPU time, cached prompt
# tokens and a digest of the texts. Prompts are fresh each pass unless SALT fixes them (prompt-cache hits).
# Usage: python3 bench/serve_load.py URL MODE N PROMPT REPLY PASSES TOP_ID [SALT]
import hashlib, json, os, random, sys, threading, time, urllib.request

url, mode = sys.argv[1], sys.argv[2]
n, prompt, reply, passes, top_id = map(int, sys.argv[3:8])
fixed_salt = int(sys.argv[8]) if len(sys.argv) > 8 else None  # the same prompts every pass (prompt-cache hits)
for _ in range(900):
    try:
        if urllib.request.urlopen(url + "/health", timeout=2).status == 200: break
    except Exception: pass
    time.sleep(1)
model = json.load(urllib.request.urlopen(url + "/v1/models"))["data"][0]["id"]


def run_pass(tag, salt):
    cpu0 = sum(os.times()[:2])
    t0 = time.perf_counter()
    stamps = [[] for _ in range(n)]
    texts = [[] for _ in range(n)]
    usage = [0] * n
    cached = [0] * n
    errors = []

    def one(i):
        rng = random.Random(salt * 100003 + i)  # fresh prompts every pass: no prompt-cache hits
        body = {"model": model, "prompt": [rng.randrange(10, top_id) for _ in range(prompt)], "max_tokens": reply,
                "temperature": 0, "stream": True, "stream_options": {"include_usage": True}, "seed": i}
        if mode == "logprobs": body["logprobs"] = 0
        if mode == "top5": body["logprobs"] = 5
        if mode == "penalty": body.update(temperature=0.8, top_p=0.95, presence_penalty=0.5)
        req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                     {"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                for line in r:
                    line = line.decode().strip()
                    if not line.startswith("data: ") or line == "data: [DONE]": continue
                    ev = json.loads(line[6:])
                    if ev.get("usage"):
                        usage[i] = ev["usage"]["completion_tokens"]
                        cached[i] = (ev["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                    if ev["choices"] and ev["choices"][0].get("text"):
                        stamps[i].append(time.perf_counter() - t0)
                        texts[i].append(ev["choices"][0]["text"])
        except Exception as e:
            errors.append(repr(e))

    th = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in th: t.start()
    for t in th: t.join()
    wall = max(s[-1] for s in stamps if s)
    tokens, chunks = sum(usage), sum(len(s) for s in stamps)
    all_first = max(s[0] for s in stamps if s)
    after = sum(sum(1 for x in s if x > all_first) for s in stamps) * tokens / max(chunks, 1)
    ttft = sorted(s[0] for s in stamps if s)
    sha = hashlib.sha256("\x00".join("".join(t) for t in texts).encode()).hexdigest()[:16]
    print(f"{mode} {tag}: {n} streams x ({prompt} in, {reply} out): {tokens} tokens, whole {tokens / wall:.0f} tok/s, "
          f"decode {after / (wall - all_first):.0f} tok/s, ttft p50 {ttft[len(ttft) // 2] * 1e3:.0f} ms "
          f"max {ttft[-1] * 1e3:.0f} ms, wall {wall:.3f} s, client cpu {sum(os.times()[:2]) - cpu0:.2f} s, "
          f"cached {sum(cached)}, errors {len(errors)} {errors[:2]}, "
          f"text sha {sha}",
          flush=True)


for p in range(passes):
    run_pass(f"pass {p}", fixed_salt if fixed_salt is not None else int(time.time() * 1000) % 1000003)
