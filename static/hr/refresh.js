"use strict";
// Regions of the HR pages that refresh themselves: every [data-refresh-url] element is replaced,
// each data-refresh-seconds (default 3), by the fragment the server renders at that URL, until
// a fragment carries [data-refresh-done]. The [data-refresh-status=<region id>] element says
// when it last changed, or why it did not. A hidden tab rests. Served in the hr bundle
// (blueprints/assets.py): the Content-Security-Policy allows no inline script.
(() => {
  const clock = () => new Date().toLocaleTimeString(document.documentElement.lang);
  // The words, in the page's language (<body data-words>, blueprints/words.py).
  const words = JSON.parse(document.body.dataset.words || "{}");
  const text = (key, value = "") => (words[key] || key).replace("%s", value);

  function follow(region) {
    const status = document.querySelector(`[data-refresh-status="${region.id}"]`);
    const every = 1000 * Number(region.dataset.refreshSeconds || 3);
    const say = (text, stale = false) => {
      if (!status) return;
      status.textContent = text;
      status.classList.toggle("is-stale", stale);
    };

    async function refresh() {
      const response = await fetch(region.dataset.refreshUrl, {
        headers: { Accept: "text/html" },
        credentials: "same-origin",
      });
      if (response.redirected) throw new Error(text("session_ended"));
      if (!response.ok) throw new Error(text("server_answered", response.status));
      region.innerHTML = await response.text(); // rendered and escaped by the server
    }

    async function tick() {
      if (!document.hidden) {
        try {
          await refresh();
          say(text("updated", clock()));
        } catch (error) {
          say(text("not_updated", error.message), true);
        }
      }
      if (region.querySelector("[data-refresh-done]")) {
        say(text("up_to_date", clock()));
        return;
      }
      setTimeout(tick, every);
    }

    if (!region.querySelector("[data-refresh-done]")) setTimeout(tick, every);
  }

  document.querySelectorAll("[data-refresh-url]").forEach(follow);
})();
