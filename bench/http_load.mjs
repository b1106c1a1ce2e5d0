// HTTP load benchmark: C concurrent clients stream chat completions from a running foldserve for D seconds and
// report requests/s, tokens/s and time-to-first-token percentiles. Usage: node bench/http_load.mjs URL [C] [D] [MAX]
const [url = 'http://127.0.0.1:8888', concurrency = '8', duration = '20', maxTokens = '32'] = process.argv.slice(2);
const asks = ['Tell me something about computers.', 'Say something wise.', 'Give me a fortune about love.',
  'What is the meaning of life?', 'Tell me a joke.', 'Say something about cats.'];
const ttft = [];
let done = 0, tokens = 0, failed = 0;
const stopAt = Date.now() + Number(duration) * 1000;

async function one(i) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'fortune-demo', stream: true, max_tokens: Number(maxTokens), temperature: 0.8,
      seed: i, messages: [{ role: 'user', content: asks[i % asks.length] }] }),
  });
  if (!res.ok) { failed++; await res.text(); return; }
  let first = true;
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    for (const line of decoder.decode(chunk, { stream: true }).split('\n')) {
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const delta = JSON.parse(line.slice(6)).choices?.[0]?.delta;
      if (delta?.content) {
        if (first) { ttft.push(performance.now() - t0); first = false; }
        tokens++;
      }
    }
  }
  done++;
}

async function client(c) {
  for (let i = c; Date.now() < stopAt; i += Number(concurrency)) await one(i);
}

// Waits until the server has loaded its model.
for (let i = 0; i < 600; i++) {
  const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
  if (ok) break;
  await new Promise((r) => setTimeout(r, 100));
}
const t0 = performance.now();
await Promise.all(Array.from({ length: Number(concurrency) }, (_, c) => client(c)));
const secs = (performance.now() - t0) / 1000;
ttft.sort((a, b) => a - b);
const pct = (p) => ttft.length ? ttft[Math.min(ttft.length - 1, Math.floor(p * ttft.length))].toFixed(1) : 'n/a';
console.log(`concurrency ${concurrency}  requests ${done} (${failed} failed) in ${secs.toFixed(1)} s  ` +
  `${(done / secs).toFixed(2)} req/s  ${(tokens / secs).toFixed(1)} streamed pieces/s  ` +
  `TTFT ms p50 ${pct(0.5)} p90 ${pct(0.9)} p99 ${pct(0.99)}`);
