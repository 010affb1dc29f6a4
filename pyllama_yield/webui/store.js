// Conversations and settings, kept in the browser (localStorage): nothing is stored server-side.

const CONVERSATIONS = "pyllama.conversations";
const CURRENT = "pyllama.current";
const SETTINGS = "pyllama.settings";

// model: the one chosen when the server is a router (several models by name); "" otherwise
export const DEFAULT_SETTINGS = {
  system: "", temperature: 0.8, top_p: 0.95, max_tokens: -1, api_key: "", theme: "", model: "",
};

function read(key, fallback) {
  try {
    const value = JSON.parse(localStorage.getItem(key));
    return value ?? fallback;
  } catch {
    return fallback; // a corrupt entry is dropped, not fatal
  }
}

export function loadSettings() {
  return { ...DEFAULT_SETTINGS, ...read(SETTINGS, {}) };
}

export function saveSettings(settings) {
  localStorage.setItem(SETTINGS, JSON.stringify(settings));
}

export class Conversations {
  constructor() {
    this.all = read(CONVERSATIONS, []);
    this.currentId = read(CURRENT, null);
    if (!this.current()) this.create();
  }

  current() {
    return this.all.find((c) => c.id === this.currentId);
  }

  create() {
    const conv = { id: crypto.randomUUID(), name: "New conversation", created: Date.now(), messages: [] };
    this.all.unshift(conv);
    this.select(conv.id);
    return conv;
  }

  select(id) {
    this.currentId = id;
    this.save();
  }

  rename(id, name) {
    const conv = this.all.find((c) => c.id === id);
    if (conv && name.trim()) conv.name = name.trim();
    this.save();
  }

  remove(id) {
    this.all = this.all.filter((c) => c.id !== id);
    if (this.currentId === id) {
      if (this.all.length) this.currentId = this.all[0].id;
      else this.create();
    }
    this.save();
  }

  save() {
    localStorage.setItem(CONVERSATIONS, JSON.stringify(this.all));
    localStorage.setItem(CURRENT, JSON.stringify(this.currentId));
  }
}
