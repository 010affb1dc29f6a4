// The server's public routes only (as llama-server's page uses them), so the page works against
// llama-server too: /v1/chat/completions streamed, /props, /slots, /metrics.

export class ApiError extends Error {
  constructor(status, message, type) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

function headers(apiKey) {
  const h = { "Content-Type": "application/json" };
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}

async function errorOf(response) {
  let message = `${response.status} ${response.statusText}`;
  let type = "";
  try {
    const body = await response.json();
    message = body.error?.message ?? message;
    type = body.error?.type ?? "";
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, message, type);
}

export async function getJson(path, apiKey) {
  const response = await fetch(path, { headers: headers(apiKey) });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

export async function getText(path, apiKey) {
  const response = await fetch(path, { headers: headers(apiKey) });
  if (!response.ok) throw await errorOf(response);
  return response.text();
}

// Streams a chat completion; onDelta(choiceDelta, chunk) for every event. Resolves with the last
// chunk (which carries llama-server's `timings`); rejects with ApiError, or AbortError on stop.
export async function streamChat(body, apiKey, signal, onDelta) {
  const response = await fetch("/v1/chat/completions", {
    method: "POST",
    headers: headers(apiKey),
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  if (!response.ok) throw await errorOf(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let last = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return last;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new ApiError(chunk.error.code ?? 500, chunk.error.message, chunk.error.type);
        last = chunk;
        const delta = chunk.choices?.[0]?.delta;
        if (delta) onDelta(delta, chunk);
      }
    }
  }
  return last;
}

// Prometheus text -> {name: value} for the unlabelled samples.
export function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const [name, value] = line.split(/\s+/);
    out[name] = Number(value); // a labelled one under its name with labels: a{b="c"}
  }
  return out;
}
