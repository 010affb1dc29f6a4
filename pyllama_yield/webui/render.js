// Messages to DOM. Model output is Markdown rendered by marked and then sanitised by DOMPurify,
// so whatever the model writes (<script>, onerror=, javascript: links) never runs.

/* global marked, DOMPurify, hljs */

export function markdown(text) {
  const div = document.createElement("div");
  div.className = "content";
  div.innerHTML = DOMPurify.sanitize(marked.parse(text ?? ""));
  for (const code of div.querySelectorAll("pre code")) {
    hljs.highlightElement(code);
    const copy = document.createElement("button");
    copy.className = "copy";
    copy.textContent = "copy";
    copy.addEventListener("click", () => navigator.clipboard?.writeText(code.textContent));
    code.parentElement.append(copy);
  }
  return div;
}

function button(label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.addEventListener("click", onClick);
  return b;
}

// One message; actions: {edit, regenerate} callbacks where they apply.
export function messageElement(message, actions = {}) {
  const el = document.createElement("div");
  el.className = `message ${message.role}`;
  if (message.role === "user") {
    el.append(Object.assign(document.createElement("div"), { className: "content", textContent: message.content }));
  } else {
    if (message.reasoning) {
      const details = document.createElement("details");
      const summary = document.createElement("summary");
      summary.textContent = "Reasoning";
      const pre = document.createElement("pre");
      pre.textContent = message.reasoning;
      details.append(summary, pre);
      el.append(details);
    }
    el.append(markdown(message.content));
    for (const call of message.tool_calls ?? []) {
      const div = document.createElement("div");
      div.className = "tool-call";
      div.textContent = `🔧 ${call.function?.name ?? "?"}(${call.function?.arguments ?? ""})`;
      el.append(div);
    }
  }
  const meta = document.createElement("div");
  meta.className = "meta";
  if (message.timings?.predicted_per_second) {
    const speed = document.createElement("span");
    speed.className = "speed";
    speed.textContent = `${message.timings.predicted_n} tokens, ${message.timings.predicted_per_second.toFixed(1)} tok/s`;
    meta.append(speed);
  }
  if (message.stopped) meta.append(Object.assign(document.createElement("span"), { textContent: "stopped" }));
  if (actions.edit) meta.append(button("edit", actions.edit));
  if (actions.regenerate) meta.append(button("regenerate", actions.regenerate));
  if (meta.childElementCount) el.append(meta);
  return el;
}
