// The chat page: conversations (kept in this browser), a streamed answer per message, stop,
// edit and regenerate, settings, and the live queue panel. Against a router (several models by
// name), a model picker: the chosen model is named in every request.

import { ApiError, getJson, streamChat } from "./api.js";
import { messageElement } from "./render.js";
import { Conversations, loadSettings, saveSettings } from "./store.js";
import { QueuePanel } from "./queue.js";

const $ = (sel) => document.querySelector(sel);
const conversations = new Conversations();
let settings = loadSettings();
let running = null; // the AbortController of the answer being streamed
let router = false; // the server is a router: requests name settings.model

function applyTheme() {
  if (settings.theme) document.documentElement.dataset.theme = settings.theme;
  else delete document.documentElement.dataset.theme;
  const dark = settings.theme ? settings.theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
  $("#hljs-light").media = dark ? "not all" : "all";
  $("#hljs-dark").media = dark ? "all" : "not all";
}

function showError(message) {
  const el = $("#error");
  el.textContent = message ?? "";
  el.hidden = !message;
}

function renderConversations() {
  const items = conversations.all.map((c) => {
    const li = document.createElement("li");
    li.className = c.id === conversations.currentId ? "active" : "";
    li.dataset.id = c.id;
    const name = Object.assign(document.createElement("span"), { textContent: c.name, title: "double-click to rename" });
    name.addEventListener("dblclick", () => {
      const given = prompt("Rename conversation", c.name);
      if (given !== null) conversations.rename(c.id, given);
      renderConversations();
    });
    const del = Object.assign(document.createElement("button"), { textContent: "×", title: "Delete" });
    del.className = "delete";
    del.addEventListener("click", (e) => {
      e.stopPropagation();
      if (running) return;
      conversations.remove(c.id);
      renderAll();
    });
    li.append(name, del);
    li.addEventListener("click", () => {
      if (running) return;
      conversations.select(c.id);
      renderAll();
    });
    return li;
  });
  $("#conversations").replaceChildren(...items);
}

function renderMessages() {
  const conv = conversations.current();
  const last = conv.messages.length - 1;
  const els = conv.messages.map((m, i) =>
    messageElement(m, {
      edit: m.role === "user" && !running ? () => editMessage(i) : null,
      regenerate: m.role === "assistant" && i === last && !running ? () => regenerate() : null,
    }),
  );
  const box = $("#messages");
  box.replaceChildren(...els);
  box.scrollTop = box.scrollHeight;
}

function renderAll() {
  renderConversations();
  renderMessages();
}

function requestBody(messages) {
  const history = messages.map(({ role, content }) => ({ role, content }));
  if (settings.system) history.unshift({ role: "system", content: settings.system });
  const body = { messages: history, temperature: Number(settings.temperature), top_p: Number(settings.top_p) };
  if (Number(settings.max_tokens) >= 0) body.max_tokens = Number(settings.max_tokens);
  if (router) body.model = settings.model;
  return body;
}

async function answer() {
  const conv = conversations.current();
  const reply = { role: "assistant", content: "", reasoning: "", tool_calls: [] };
  const body = requestBody(conv.messages);
  conv.messages.push(reply);
  running = new AbortController();
  setBusy(true);
  let pending = false;
  const redraw = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      renderMessages();
    });
  };
  try {
    const last = await streamChat(body, settings.api_key, running.signal, (delta) => {
      if (delta.content) reply.content += delta.content;
      if (delta.reasoning_content) reply.reasoning += delta.reasoning_content;
      for (const call of delta.tool_calls ?? []) {
        const slot = (reply.tool_calls[call.index ?? 0] ??= { function: { name: "", arguments: "" } });
        if (call.function?.name) slot.function.name += call.function.name;
        if (call.function?.arguments) slot.function.arguments += call.function.arguments;
      }
      redraw();
    });
    if (last?.timings) reply.timings = last.timings;
  } catch (e) {
    if (e.name === "AbortError") {
      reply.stopped = true;
    } else {
      conv.messages.pop(); // no half answer for a failed request
      await handleError(e);
    }
  } finally {
    running = null;
    setBusy(false);
    conversations.save();
    renderMessages();
  }
}

async function handleError(e) {
  if (e instanceof ApiError && e.status === 401) {
    const key = prompt("This server needs an API key (--api-key):", settings.api_key);
    if (key !== null) {
      settings = { ...settings, api_key: key };
      saveSettings(settings);
      showError("API key saved: send again.");
      return;
    }
  }
  if (e instanceof ApiError && e.type === "exceed_context_size_error") {
    showError(`The conversation no longer fits the context: ${e.message}. Start a new one, or edit it shorter.`);
  } else if (e instanceof ApiError && e.status === 503) {
    showError(`The server is busy: ${e.message}`);
  } else {
    showError(e.message ?? String(e));
  }
}

function setBusy(busy) {
  $("#send").hidden = busy;
  $("#stop").hidden = !busy;
  $("#input").disabled = false;
}

async function send(text) {
  if (!text.trim() || running) return;
  showError(null);
  const conv = conversations.current();
  if (!conv.messages.length) conv.name = text.trim().slice(0, 40);
  conv.messages.push({ role: "user", content: text });
  conversations.save();
  renderAll();
  await answer();
}

async function regenerate() {
  const conv = conversations.current();
  if (conv.messages.at(-1)?.role === "assistant") conv.messages.pop();
  renderMessages();
  await answer();
}

async function editMessage(index) {
  const conv = conversations.current();
  const given = prompt("Edit message", conv.messages[index].content);
  if (given === null || !given.trim()) return;
  conv.messages.splice(index); // the answers after it no longer hold
  conversations.save();
  await send(given);
}

function exportConversation() {
  const conv = conversations.current();
  const blob = new Blob([JSON.stringify(conv, null, 2)], { type: "application/json" });
  const a = Object.assign(document.createElement("a"), {
    href: URL.createObjectURL(blob),
    download: `${conv.name.replace(/[^\w.-]+/g, "_") || "conversation"}.json`,
  });
  a.click();
  URL.revokeObjectURL(a.href);
}

function openSettings() {
  const form = $("#settings form");
  for (const [name, value] of Object.entries(settings)) if (form.elements[name]) form.elements[name].value = value;
  $("#settings").showModal();
}

function wire() {
  $("#composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("#input").value;
    $("#input").value = "";
    send(text);
  });
  $("#input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("#composer").requestSubmit();
    }
  });
  $("#stop").addEventListener("click", () => running?.abort());
  $("#new-chat").addEventListener("click", () => {
    if (running) return;
    conversations.create();
    renderAll();
  });
  $("#export-chat").addEventListener("click", exportConversation);
  $("#open-settings").addEventListener("click", openSettings);
  $("#settings").addEventListener("close", () => {
    if ($("#settings").returnValue !== "save") return;
    const form = $("#settings form");
    for (const name of ["system", "temperature", "top_p", "max_tokens", "api_key"]) settings[name] = form.elements[name].value;
    saveSettings(settings);
  });
  $("#model-select").addEventListener("change", (e) => {
    settings.model = e.target.value;
    saveSettings(settings);
  });
  $("#model-select").addEventListener("focus", () => listModels().catch(() => {})); // statuses change
  $("#toggle-theme").addEventListener("click", () => {
    const dark = document.documentElement.dataset.theme
      ? document.documentElement.dataset.theme === "dark"
      : matchMedia("(prefers-color-scheme: dark)").matches;
    settings.theme = dark ? "light" : "dark";
    saveSettings(settings);
    applyTheme();
  });
}

// A router's models, with their status, in the picker; the saved choice if it is still there.
async function listModels() {
  const { data } = await getJson("/models", settings.api_key);
  const options = data.map((m) =>
    Object.assign(document.createElement("option"), { value: m.id, textContent: `${m.id} (${m.status?.value ?? "?"})` }),
  );
  const select = $("#model-select");
  select.replaceChildren(...options);
  if (!data.some((m) => m.id === settings.model)) settings.model = data[0]?.id ?? "";
  select.value = settings.model;
}

async function showModel() {
  try {
    const props = await getJson("/props", settings.api_key);
    if (props.role === "router") {
      router = true;
      $("#model-name").hidden = true;
      $("#model-select").hidden = false;
      await listModels();
      return;
    }
    $("#model-name").textContent = props.model_alias || props.model_path || "model";
    const nCtx = props.default_generation_settings?.n_ctx;
    if (nCtx) $("#model-ctx").textContent = `context ${nCtx} tokens`;
  } catch (e) {
    if (e.status === 401) $("#model-name").textContent = "API key needed (Settings)";
  }
}

// A router's /slots and /metrics are its model's: asked only while the chosen model runs (never
// load a model just to show its queue); null: nothing to show now.
async function queueQuery() {
  if (!router) return "";
  const { data } = await getJson("/models", settings.api_key).catch(() => ({ data: [] }));
  const status = data.find((m) => m.id === settings.model)?.status?.value;
  return status === "loaded" || status === "sleeping" ? `?model=${encodeURIComponent(settings.model)}&autoload=false` : null;
}

if ("serviceWorker" in navigator && window.isSecureContext) navigator.serviceWorker.register("sw.js").catch(() => {});
applyTheme();
wire();
renderAll();
showModel().finally(() => new QueuePanel($("#queue"), () => settings.api_key, queueQuery).start());
