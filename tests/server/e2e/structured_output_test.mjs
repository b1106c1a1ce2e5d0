// Structured output through a running foldserve, checked by independent parsers: every reply of the shared schema
// cases (greedy and seeded, streamed and not) must parse and validate under ajv; forced tool calls through the
// openai client; JSON mode; regex; refusals; concurrent == solo; and on fortune-demo a constrained greedy reply
// equals the unconstrained reference when that reply already satisfies the constraint.
// Environment: FOLDSERVE_URL (tiny-qwen3 server), FOLDSERVE_FORTUNE_URL (fortune-demo server),
// FOLDSERVE_CASES (fortune-demo cases.json). Exits non-zero on a failure.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import Ajv from "ajv";
import addFormats from "ajv-formats";
import OpenAI from "openai";
import { check, finish } from "./checks.mjs";

const structured = JSON.parse(readFileSync(new URL("./structured_cases.json", import.meta.url), "utf8"));
const fortuneCases = JSON.parse(readFileSync(process.env.FOLDSERVE_CASES, "utf8")).cases;
const client = new OpenAI({ baseURL: `${process.env.FOLDSERVE_URL}/v1`, apiKey: "none", maxRetries: 0 });
const fortune = new OpenAI({ baseURL: `${process.env.FOLDSERVE_FORTUNE_URL}/v1`, apiKey: "none", maxRetries: 0 });
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);

function validate(schema, text, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`${what}: not JSON: ${JSON.stringify(text)}`);
  }
  const ok = ajv.validate(schema, value);
  assert.ok(ok, `${what}: ${JSON.stringify(text)} fails: ${ajv.errorsText()}`);
}

const ask = [{ role: "user", content: "Answer in JSON." }];

async function streamedContent(request) {
  const stream = await client.chat.completions.create({ ...request, stream: true });
  let text = "", finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    text += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish };
}

// Unbounded schemas (free strings and keys) may never close under random weights: they may end with "length", but
// every reply that stops must validate and at least one of five seeds must stop.
async function unboundedCase(c, response_format) {
  let stopped = 0;
  for (const seed of [1, 2, 3, 4, 5]) {
    const r = await client.chat.completions.create({ model: "tiny-qwen3", messages: ask, temperature: 1, seed,
                                                     max_tokens: 300, response_format });
    if (r.choices[0].finish_reason === "length") continue;
    validate(c.schema, r.choices[0].message.content, `seed ${seed}`);
    stopped++;
  }
  assert.ok(stopped > 0, "no seed finished");
}

for (const [i, c] of structured.schemas.entries()) {
  const response_format = { type: "json_schema", json_schema: { name: c.name, schema: c.schema, strict: true } };
  if (c.unbounded) {
    await check(`schema ${c.name}: every finished seeded reply validates`, () => unboundedCase(c, response_format));
    continue;
  }
  const greedy = { model: "tiny-qwen3", messages: ask, temperature: 0, max_tokens: 600, response_format };
  const seeded = { ...greedy, temperature: 1, seed: 100 + i };
  await check(`schema ${c.name}: greedy reply validates`, async () => {
    const r = await client.chat.completions.create(greedy);
    assert.equal(r.choices[0].finish_reason, "stop");
    validate(c.schema, r.choices[0].message.content, "greedy");
  });
  await check(`schema ${c.name}: seeded streamed reply validates and equals the unstreamed one`, async () => {
    const { text, finish } = await streamedContent(seeded);
    assert.equal(finish, "stop");
    validate(c.schema, text, "seeded");
    const whole = await client.chat.completions.create(seeded);
    assert.equal(whole.choices[0].message.content, text);
  });
}

await check("json_object mode gives objects (chat and completions)", async () => {
  await unboundedCase({ schema: { type: "object" } }, { type: "json_object" });
  const t = await client.completions.create({ model: "tiny-qwen3", prompt: "{", max_tokens: 300, temperature: 0,
                                              response_format: { type: "json_object" } });
  if (t.choices[0].finish_reason === "stop") assert.equal(typeof JSON.parse(t.choices[0].text), "object");
  else assert.match(t.choices[0].text, /^\s*\{/);
});

for (const pattern of structured.regexes) {
  await check(`regex ${pattern} matches the whole completion`, async () => {
    const r = await client.completions.create({ model: "tiny-qwen3", prompt: "x", max_tokens: 200, temperature: 1,
                                                seed: 3, regex: pattern });
    assert.equal(r.choices[0].finish_reason, "stop");
    assert.match(r.choices[0].text, new RegExp(`^(?:${pattern})$`, "u"));
  });
}

const tools = [
  { type: "function", function: { name: "get_weather", parameters: structured.schemas.find((s) => s.name === "weather_args").schema } },
  { type: "function", function: { name: "plot", parameters: structured.schemas.find((s) => s.name === "defs_ref").schema } },
];
function checkCall(call, names) {
  assert.ok(names.includes(call.function.name), call.function.name);
  const schema = tools.find((t) => t.function.name === call.function.name).function.parameters;
  validate(schema, call.function.arguments, `arguments of ${call.function.name}`);
}
await check("tool_choice required forces a valid tool call", async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({ model: "tiny-qwen3", messages: ask, tools, tool_choice: "required",
                                                     temperature: 1, seed, max_tokens: 400 });
    assert.equal(r.choices[0].finish_reason, "tool_calls");
    assert.equal(r.choices[0].message.tool_calls.length, 1);
    checkCall(r.choices[0].message.tool_calls[0], ["get_weather", "plot"]);
  }
});
await check("a named tool_choice forces that tool, streamed too", async () => {
  const request = { model: "tiny-qwen3", messages: ask, tools, temperature: 0, max_tokens: 400,
                    tool_choice: { type: "function", function: { name: "plot" } } };
  const r = await client.chat.completions.create(request);
  checkCall(r.choices[0].message.tool_calls[0], ["plot"]);
  const stream = await client.chat.completions.create({ ...request, stream: true });
  let args = "", name = "", finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const t of c.delta?.tool_calls ?? []) {
      name += t.function?.name ?? "";
      args += t.function?.arguments ?? "";
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(finish, "tool_calls");
  assert.equal(name, "plot");
  assert.equal(args, r.choices[0].message.tool_calls[0].function.arguments);
});

await check("unsupported keywords and bad schemas are refused with 400 naming the reason", async () => {
  for (const c of structured.refused) {
    const err = await client.chat.completions
      .create({ model: "tiny-qwen3", messages: ask, max_tokens: 5,
                response_format: { type: "json_schema", json_schema: { name: "x", schema: c.schema } } })
      .then(() => null, (e) => e);
    assert.ok(err, `${JSON.stringify(c.schema)} was accepted`);
    assert.equal(err.status, 400);
    assert.ok(err.message.includes(c.reason), err.message);
  }
  const bad = await client.completions.create({ model: "tiny-qwen3", prompt: "x", regex: "(a" }).then(() => null, (e) => e);
  assert.equal(bad?.status, 400);
});

await check("a grammar that cannot finish within max_tokens ends with length and the partial text", async () => {
  const r = await client.completions.create({ model: "tiny-qwen3", prompt: "x", max_tokens: 3, temperature: 0,
                                              regex: "[a-z]{40}" });
  assert.equal(r.choices[0].finish_reason, "length");
  assert.match(r.choices[0].text, /^[a-z]+$/);
});

await check("constrained replies among concurrent requests equal their solo runs", async () => {
  const requests = structured.schemas.slice(0, 6).map((c, i) => ({
    model: "tiny-qwen3", messages: ask, max_tokens: 300, temperature: i % 2 ? 1 : 0, seed: 7 + i,
    response_format: { type: "json_schema", json_schema: { name: c.name, schema: c.schema } },
  }));
  const solo = [];
  for (const r of requests) solo.push((await client.chat.completions.create(r)).choices[0].message.content);
  const together = await Promise.all(requests.map((r) => client.chat.completions.create(r)));
  assert.deepEqual(together.map((r) => r.choices[0].message.content), solo);
});

await check("on fortune-demo a constraint the greedy reply satisfies leaves it unchanged", async () => {
  for (const c of fortuneCases) {
    // A class of exactly the reply's characters: the reference reply satisfies it, most other texts do not.
    const chars = [...new Set([...c.reply])].map((ch) => (/[\\\]\[^-]/.test(ch) ? "\\" + ch : ch === "\n" ? "\\n" : ch === "\t" ? "\\t" : ch));
    const r = await fortune.chat.completions.create({ model: "fortune-demo", messages: [{ role: "user", content: c.ask }],
                                                     temperature: 0, max_tokens: 48, regex: `[${chars.join("")}]*` });
    assert.equal(r.choices[0].message.content, c.reply);
  }
});

finish();
