// Drives a running foldserve with the official openai npm client: models, chat (plain and streamed) against the
// fortune-demo reference replies, completions, errors and keys. Environment: FOLDSERVE_URL (http://host:port),
// FOLDSERVE_KEY, FOLDSERVE_CASES (../shared/reference/fortune-demo/cases.json). Exits non-zero on a failure.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { check, finish } from "./checks.mjs";

const base = process.env.FOLDSERVE_URL;
const key = process.env.FOLDSERVE_KEY;
const cases = JSON.parse(readFileSync(process.env.FOLDSERVE_CASES, "utf8")).cases;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });

await check("models.list names fortune-demo", async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), ["fortune-demo"]);
});

for (const [i, c] of cases.entries()) {
  const request = { model: "fortune-demo", messages: [{ role: "user", content: c.ask }], temperature: 0, max_tokens: 48 };
  await check(`chat case ${i} equals the reference reply`, async () => {
    const r = await client.chat.completions.create(request);
    assert.equal(r.choices[0].message.content, c.reply);
    assert.equal(r.choices[0].message.role, "assistant");
    assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
    assert.equal(r.usage.prompt_tokens, c.ids.length);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  });
  await check(`streamed chat case ${i} equals the reference reply`, async () => {
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let text = "", finish = null, usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        text += ch.delta.content ?? "";
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    assert.equal(text, c.reply);
    assert.ok(finish === "stop" || finish === "length");
    assert.ok(usage && usage.completion_tokens > 0);
  });
}

await check("chat with n=2, seed, stop and logprobs", async () => {
  const r = await client.chat.completions.create({
    model: "fortune-demo", messages: [{ role: "user", content: cases[0].ask }], n: 2, seed: 5,
    max_tokens: 8, logprobs: true, top_logprobs: 2, stop: ["zzz-never"],
  });
  assert.equal(r.choices.length, 2);
  for (const ch of r.choices) {
    assert.ok(ch.logprobs.content.length > 0);
    assert.equal(ch.logprobs.content[0].top_logprobs.length, 2);
  }
});

await check("completions with text and token-id prompts", async () => {
  const text = await client.completions.create({ model: "fortune-demo", prompt: cases[0].text, temperature: 0, max_tokens: 48 });
  assert.equal(text.choices[0].text, cases[0].reply);
  const ids = await client.completions.create({ model: "fortune-demo", prompt: cases[0].ids, temperature: 0, max_tokens: 48 });
  assert.equal(ids.choices[0].text, cases[0].reply);
});

await check("streamed completion equals the reference reply", async () => {
  const stream = await client.completions.create({ model: "fortune-demo", prompt: cases[1].ids, temperature: 0, max_tokens: 48, stream: true });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
  assert.equal(text, cases[1].reply);
});

await check("bad values are 400 with the param named", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "fortune-demo", messages: [{ role: "user", content: "x" }], temperature: 7 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temperature");
});

await check("an unknown model is 404", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "gpt-4", messages: [{ role: "user", content: "x" }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === "model_not_found");
});

await check("a wrong key is 401", async () => {
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
});

finish();
