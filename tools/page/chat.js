// piecewise chat: a page that talks to this server's /v1/chat/completions,
// streaming the answer (server-sent events over fetch). Model text only
// ever enters the page as textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const conversation = []; // {role, content} in order
let apiKey = sessionStorage.getItem("piecewise-api-key") || "";
let running = null; // the AbortController of the answer being streamed

function headers() {
  const h = { "Content-Type": "application/json" };
  if (apiKey) h.Authorization = "Bearer " + apiKey;
  return h;
}

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

function askForKey(message) {
  $("key-form").hidden = false;
  showError(message);
  $("key").focus();
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("messages").appendChild(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    if (r.status === 401) {
      askForKey(apiKey ? "That API key was refused." : "");
      return false;
    }
    const j = await r.json();
    $("model").textContent = (j.data && j.data[0] && j.data[0].id) || "";
    $("key-form").hidden = true;
    showError("");
    return true;
  } catch (e) {
    showError("Cannot reach the server: " + e.message);
    return false;
  }
}

// The error message of a failed answer (OpenAI's error object).
async function errorText(r) {
  try {
    const j = await r.json();
    if (j.error && j.error.message) return j.error.message;
  } catch (e) { /* not JSON */ }
  return "HTTP " + r.status;
}

function setRunning(controller) {
  running = controller;
  $("send").disabled = !!controller;
  $("stop").disabled = !controller;
}

async function send(text) {
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  conversation.push({ role: "user", content: text });
  messages.push(...conversation);
  addMessage("user", text);
  const out = addMessage("assistant", "");
  out.classList.add("streaming");
  const body = {
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($("temperature").value),
    max_tokens: Number($("max-tokens").value),
  };
  const controller = new AbortController();
  setRunning(controller);
  showError("");
  $("stats").textContent = "";
  const t0 = performance.now();
  let tFirst = 0, pieces = 0, answer = "", usage = null;
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (r.status === 401) {
      askForKey("The server asks for an API key.");
      throw new Error("unauthorized");
    }
    if (!r.ok) throw new Error(await errorText(r));
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "", done = false;
    while (!done) {
      const chunk = await reader.read();
      if (chunk.done) break;
      buf += decoder.decode(chunk.value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (!line.startsWith("data: ")) continue; // blank lines and ": keep-alive"
        const data = line.slice(6);
        if (data === "[DONE]") { done = true; break; }
        const ev = JSON.parse(data);
        if (ev.error) throw new Error(ev.error.message || "the answer failed");
        if (ev.usage) usage = ev.usage;
        const delta = ev.choices && ev.choices[0] && ev.choices[0].delta;
        if (delta && delta.content) {
          if (!tFirst) tFirst = performance.now();
          pieces++;
          answer += delta.content;
          out.textContent = answer;
          out.scrollIntoView({ block: "end" });
          showStats(t0, tFirst, pieces, null);
        }
      }
    }
    conversation.push({ role: "assistant", content: answer });
    showStats(t0, tFirst, pieces, usage);
  } catch (e) {
    if (e.name === "AbortError") {
      conversation.push({ role: "assistant", content: answer }); // what came, kept
    } else {
      conversation.pop(); // the question had no answer: it can be asked again
      if (e.message !== "unauthorized") showError(e.message);
      if (!answer) out.remove();
    }
  } finally {
    out.classList.remove("streaming");
    setRunning(null);
  }
}

// tokens/s over the generation (first token to now); the usage chunk at
// the end gives the exact token count.
function showStats(t0, tFirst, pieces, usage) {
  if (!tFirst) return;
  const now = performance.now();
  const tokens = usage ? usage.completion_tokens : pieces;
  const secs = (now - tFirst) / 1000;
  const rate = secs > 0 && tokens > 1 ? ((tokens - 1) / secs).toFixed(1) : "-";
  $("stats").textContent = tokens + " tokens, " + rate + " tokens/s, first token after " +
    ((tFirst - t0) / 1000).toFixed(2) + " s";
  $("stats").dataset.tokens = String(tokens);
}

function submit() {
  const text = $("input").value;
  if (!text.trim() || running) return;
  $("input").value = "";
  send(text);
}

document.addEventListener("DOMContentLoaded", () => {
  $("chat-form").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); submit(); }
  });
  $("stop").addEventListener("click", () => { if (running) running.abort(); });
  $("clear").addEventListener("click", () => {
    if (running) running.abort();
    conversation.length = 0;
    $("messages").textContent = "";
    $("stats").textContent = "";
    showError("");
  });
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    apiKey = $("key").value.trim();
    sessionStorage.setItem("piecewise-api-key", apiKey);
    $("key").value = "";
    loadModel();
  });
  loadModel();
  $("input").focus();
});
