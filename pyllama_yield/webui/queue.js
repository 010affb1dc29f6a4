// The queue, live: every slot (idle / prompt / generating, tokens so far, speed) and the server's
// throughput and queue depth (by priority, on our server), from /slots and /metrics once a second. It keeps refreshing while
// the model decodes: the server answers these from the queue without waiting for the decode.
// Hidden when the server has neither route (--no-slots and no --metrics answer 501). ``query()``
// (or its promise): what names the model on a router ("" otherwise; null: nothing to show now).

import { getJson, getText, parseMetrics } from "./api.js";

export class QueuePanel {
  constructor(root, apiKey, query = () => "") {
    this.root = root;
    this.apiKey = apiKey;
    this.query = query;
    this.previous = new Map(); // slot id -> {n_decoded, t}
    this.refreshes = 0;
    this.off = { slots: false, metrics: false }; // a route the server does not serve (501/404)
  }

  start() {
    this.tick();
    this.timer = setInterval(() => this.tick(), 1000);
  }

  async tick() {
    const query = await this.query();
    if (query === null) {
      this.root.hidden = true; // a router whose chosen model does not run: no queue to show
      return;
    }
    const [slots, metrics] = await Promise.all([
      this.poll("slots", () => getJson(`/slots${query}`, this.apiKey())),
      this.poll("metrics", async () => parseMetrics(await getText(`/metrics${query}`, this.apiKey()))),
    ]);
    if (this.off.slots && this.off.metrics) {
      this.root.hidden = true;
      this.root.dataset.state = "off";
      clearInterval(this.timer);
      return;
    }
    this.root.hidden = false;
    this.root.dataset.state = "on";
    if (slots) this.showSlots(slots);
    if (metrics) this.showMetrics(metrics);
    this.refreshes += 1;
    const stamp = this.root.querySelector("#queue-updated");
    stamp.textContent = `updated ${new Date().toLocaleTimeString()} (#${this.refreshes})`;
    stamp.dataset.refreshes = String(this.refreshes);
  }

  // One route's answer; null when it failed (a 501 or 404 turns the route off for good).
  async poll(route, get) {
    if (this.off[route]) return null;
    try {
      return await get();
    } catch (e) {
      if (e.status === 501 || e.status === 404) this.off[route] = true;
      return null;
    }
  }

  showSlots(slots) {
    const now = performance.now();
    const rows = slots.map((s) => {
      const state = s.state ?? (s.is_processing ? "busy" : "idle");
      const before = this.previous.get(s.id);
      let speed = "";
      if (before && s.n_decoded > before.n_decoded) {
        speed = (((s.n_decoded - before.n_decoded) * 1000) / (now - before.t)).toFixed(1);
      }
      this.previous.set(s.id, { n_decoded: s.n_decoded ?? 0, t: now });
      const tr = document.createElement("tr");
      tr.className = state;
      for (const text of [s.id, state, s.n_decoded ?? 0, speed]) {
        tr.append(Object.assign(document.createElement("td"), { textContent: String(text) }));
      }
      return tr;
    });
    this.root.querySelector("#slots").replaceChildren(...rows);
  }

  showMetrics(m) {
    const parts = [];
    if ("llamacpp:predicted_tokens_seconds" in m) parts.push(`${m["llamacpp:predicted_tokens_seconds"].toFixed(1)} tok/s`);
    if ("llamacpp:requests_processing" in m) parts.push(`${m["llamacpp:requests_processing"]} processing`);
    if ("llamacpp:requests_deferred" in m) {
      // ours: by priority (lower is sooner), when more than the default one waits
      const byPriority = Object.entries(m)
        .map(([name, n]) => [name.match(/^pyllama_yield:requests_waiting\{priority="(-?\d+)"\}$/)?.[1], n])
        .filter(([p, n]) => p !== undefined && n > 0)
        .sort((a, b) => Number(a[0]) - Number(b[0]));
      const listed = byPriority.map(([p, n]) => `priority ${p}: ${n}`).join(", ");
      const detail = byPriority.some(([p]) => p !== "0") ? ` (${listed})` : "";
      parts.push(`${m["llamacpp:requests_deferred"]} waiting${detail}`);
    }
    this.root.querySelector("#throughput").textContent = parts.join(" · ");
  }
}
