// A service worker that only takes control and caches nothing: every request goes to the server,
// so the page never shows a stale answer or stale assets. It exists because llama-server's page
// ships one at this path (clients and llama.cpp's tests probe it); the page registers it so that
// "install as an app" works with the manifest.
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
