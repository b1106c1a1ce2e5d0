// Drives the chat page (GET /) in headless Chromium with playwright-core: a streamed fortune-demo reference reply
// and its usage line, Shift+Enter, an API error shown in the chat, stop midway, new chat, reload, and the API-key
// prompt. Usage: node chat_page_test.mjs URL KEYED_URL KEY (or FOLDSERVE_URL, FOLDSERVE_KEYED_URL, FOLDSERVE_KEY);
// KEYED_URL is a server started with --api-key KEY. FOLDSERVE_SHARED (default ../shared beside the checkout) holds
// the reference replies; screenshots go to FOLDSERVE_SCREENSHOT_DIR (default the OS temp folder). Exits non-zero on
// a failure.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { check, finish } from "./checks.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const base = process.argv[2] ?? process.env.FOLDSERVE_URL;
const keyedBase = process.argv[3] ?? process.env.FOLDSERVE_KEYED_URL;
const key = process.argv[4] ?? process.env.FOLDSERVE_KEY;
const shared = process.env.FOLDSERVE_SHARED ?? resolve(here, "../../../../shared");
const shots = process.env.FOLDSERVE_SCREENSHOT_DIR ?? join(tmpdir(), "foldserve-chat-page");
const cases = JSON.parse(readFileSync(join(shared, "reference/fortune-demo/cases.json"), "utf8")).cases;
// The reference replies were made greedily with this many tokens at most (as openai_client_test.mjs asks).
const referenceMaxTokens = 48;
// fortune-demo's greedy reply to this is one of its longest (about 200 tokens); the page reads it through a
// throttled network so that Stop lands midway however fast the server is.
const longAsk = "Give me a fortune about life.";
const longMaxTokens = 2000;
const throttledBytesPerSecond = 4000;
assert.ok(base && keyedBase && key, "usage: node chat_page_test.mjs URL KEYED_URL KEY");
mkdirSync(shots, { recursive: true });

// A chat completion straight from the API (not through the page), with the page's body made non-streaming.
async function apiChat(url, body, headers = {}) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: JSON.stringify({ ...body, stream: false, stream_options: undefined }),
  });
  return { status: res.status, json: await res.json() };
}

// Sets temperature and max tokens, types `ask` and presses Enter; returns the body the page posted.
async function sendFromPage(page, ask, { temperature = "0", maxTokens = String(referenceMaxTokens) } = {}) {
  if (!(await page.locator("#settings").evaluate((d) => d.open))) await page.getByText("Settings").click();
  await page.getByLabel("Temperature").fill(temperature);
  await page.getByLabel("Max tokens").fill(maxTokens);
  await page.getByLabel("Message", { exact: true }).fill(ask);
  const posted = page.waitForRequest((r) => r.url().endsWith("/v1/chat/completions") && r.method() === "POST");
  await page.getByLabel("Message", { exact: true }).press("Enter");
  return JSON.parse((await posted).postData());
}

// Records every distinct text the last assistant reply shows while it streams.
async function watchReplies(page) {
  await page.evaluate(() => {
    window.replyTexts = [];
    new MutationObserver(() => {
      const texts = document.querySelectorAll(".message.assistant .text");
      const text = texts.length ? texts[texts.length - 1].textContent : "";
      if (text && text !== window.replyTexts.at(-1)) window.replyTexts.push(text);
    }).observe(document.getElementById("log"), { childList: true, subtree: true, characterData: true });
  });
}

const lastReply = (page) => page.locator(".message.assistant").last();
// Waits until the last reply has ended (done, stopped or error).
const settled = (page) =>
  page.waitForFunction(() => [...document.querySelectorAll(".message.assistant")].at(-1).dataset.state !== "streaming");

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"], headless: true });
try {
  const models = await (await fetch(`${base}/v1/models`)).json();
  const model = models.data[0];
  const context = await browser.newContext({ viewport: { width: 1000, height: 720 } });
  const page = await context.newPage();
  const requested = [];
  page.on("request", (r) => requested.push(r.url()));
  await page.goto(base);

  await check("the page loads self-contained and names the served model", async () => {
    await page.locator("#model-name").filter({ hasText: model.id }).waitFor();
    assert.deepEqual(requested.filter((u) => !u.startsWith(base)), []);
    assert.equal(await page.locator("#attach-control").isVisible(), model.vision === true);
  });

  await check("Shift+Enter adds a line and sends nothing", async () => {
    const prompt = page.getByLabel("Message", { exact: true });
    await prompt.fill("first line");
    await prompt.press("Shift+Enter");
    assert.equal(await prompt.inputValue(), "first line\n");
    assert.equal(await page.locator(".message").count(), 0);
    await prompt.fill("");
  });

  await check("the first reference prompt streams its reference reply, with a usage line", async () => {
    await watchReplies(page);
    // A slowed download makes the stream arrive in several reads however fast the server answers.
    const cdp = await context.newCDPSession(page);
    const network = { offline: false, latency: 0, uploadThroughput: -1 };
    await cdp.send("Network.emulateNetworkConditions", { ...network, downloadThroughput: throttledBytesPerSecond });
    const body = await sendFromPage(page, cases[0].ask);
    assert.equal(body.stream, true);
    assert.equal(body.stream_options.include_usage, true);
    await settled(page);
    await cdp.send("Network.emulateNetworkConditions", { ...network, downloadThroughput: -1 });
    assert.equal(await lastReply(page).getAttribute("data-state"), "done");
    assert.equal(await lastReply(page).locator(".text").textContent(), cases[0].reply);
    const seen = await page.evaluate(() => window.replyTexts);
    assert.ok(seen.length > 1, `the reply arrived in ${seen.length} update(s)`);
    assert.equal(seen.at(-1), cases[0].reply);
    const usage = await lastReply(page).locator(".usage").textContent();
    const m = usage.match(/^(\d+) tokens · [\d.]+ tok\/s · prompt (\d+) tokens \((\d+) cached\)$/);
    assert.ok(m, `usage line: ${usage}`);
    assert.ok(Number(m[1]) > 1);
    assert.equal(Number(m[2]), cases[0].ids.length);
    await page.screenshot({ path: join(shots, "chat_page_light.png") });
  });

  await check("an API error is shown in the chat", async () => {
    const body = await sendFromPage(page, cases[1].ask, { temperature: "5" });
    const expected = await apiChat(base, body);
    assert.equal(expected.status, 400);
    const error = page.locator(".message.error").last();
    await error.waitFor();
    assert.equal(await error.textContent(), expected.json.error.message);
    assert.equal(await page.getByRole("button", { name: "Send" }).isVisible(), true);
  });

  await check("stop ends a long reply midway, keeps what arrived, and the page works again", async () => {
    await page.getByRole("button", { name: "New chat" }).click();
    assert.equal(await page.locator(".message").count(), 0);
    const cdp = await context.newCDPSession(page);
    const network = { offline: false, latency: 0, uploadThroughput: -1 };
    await cdp.send("Network.emulateNetworkConditions", { ...network, downloadThroughput: throttledBytesPerSecond });
    const body = await sendFromPage(page, longAsk, { maxTokens: String(longMaxTokens) });
    await lastReply(page).locator(".text").filter({ hasText: /\S/ }).waitFor();
    await page.getByRole("button", { name: "Stop" }).click();
    await settled(page);
    await cdp.send("Network.emulateNetworkConditions", { ...network, downloadThroughput: -1 });
    assert.equal(await lastReply(page).getAttribute("data-state"), "stopped");
    const kept = await lastReply(page).locator(".text").textContent();
    const full = (await apiChat(base, body)).json.choices[0].message.content;
    assert.ok(kept.length > 0 && kept.length < full.length, `kept ${kept.length} of ${full.length} characters`);
    assert.ok(full.startsWith(kept), "the kept text is the start of the full reply");
    assert.match(await lastReply(page).locator(".usage").textContent(), /stopped/);
    assert.equal(await page.getByRole("button", { name: "Stop" }).isVisible(), false);
    await sendFromPage(page, cases[1].ask);
    await settled(page);
    assert.equal(await lastReply(page).getAttribute("data-state"), "done");
    assert.ok((await lastReply(page).locator(".text").textContent()).length > 0);
  });

  await check("reload clears the chat and the next reference prompt gets its reference reply", async () => {
    await page.reload();
    await page.locator("#model-name").filter({ hasText: model.id }).waitFor();
    assert.equal(await page.locator(".message").count(), 0);
    await sendFromPage(page, cases[1].ask);
    await settled(page);
    assert.equal(await lastReply(page).locator(".text").textContent(), cases[1].reply);
  });

  await check("dark and narrow: the reply fits the screen", async () => {
    await page.emulateMedia({ colorScheme: "dark" });
    await page.setViewportSize({ width: 380, height: 720 });
    const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    assert.ok(widths[0] <= widths[1], `page ${widths[0]}px wide in a ${widths[1]}px window`);
    await page.screenshot({ path: join(shots, "chat_page_dark_narrow.png") });
  });
  await context.close();

  await check("a server with --api-key: the page asks for the key, refuses a wrong one, keeps the right one", async () => {
    const keyed = await browser.newContext();
    const page = await keyed.newPage();
    await page.goto(keyedBase);
    const dialog = page.getByRole("dialog", { name: "API key required" });
    await dialog.waitFor();
    await page.screenshot({ path: join(shots, "chat_page_key.png") });
    await dialog.getByLabel(/API key/).fill(`${key}-wrong`);
    await dialog.getByRole("button", { name: "Use key" }).click();
    const refusal = (await (await fetch(`${keyedBase}/v1/models`, { headers: { Authorization: `Bearer ${key}-wrong` } })).json());
    await dialog.locator("#key-problem").filter({ hasText: refusal.error.message }).waitFor();
    await dialog.getByLabel(/API key/).fill(key);
    await dialog.getByRole("button", { name: "Use key" }).click();
    await page.locator("#model-name").filter({ hasText: model.id }).waitFor();
    await sendFromPage(page, cases[2].ask);
    await settled(page);
    assert.equal(await lastReply(page).locator(".text").textContent(), cases[2].reply);
    await page.reload();
    await page.locator("#model-name").filter({ hasText: model.id }).waitFor();
    assert.equal(await dialog.isVisible(), false);
    await keyed.close();
  });
} finally {
  await browser.close();
}
finish();
