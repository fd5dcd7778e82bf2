"use strict";
// Live refresh of the console. Every few seconds:
// - each [data-live-figures=URL] region fetches the figures as JSON and writes them into its
//   [data-field] elements: the totals into [data-totals], one row per queue into [data-rows]
//   (new queues are cloned from the region's <template data-row>);
// - each [data-live-html=URL] region is replaced by the server-rendered fragment at URL, until
//   the fragment carries [data-live-done];
// - a "pauta:refresh" event tells the charts to refresh.
// The "Live" switch pauses all of it (remembered in this browser); a hidden tab rests too.
(() => {
  const INTERVAL_MS = 5000;
  const STORE_KEY = "pauta.console.live";
  const toggle = document.querySelector("[data-live-toggle]");
  const status = document.querySelector("[data-live-status]");
  let busy = false;

  const say = (text, stale = false) => {
    if (!status) return;
    status.textContent = text;
    status.classList.toggle("is-stale", stale);
  };
  const clock = () => new Date().toLocaleTimeString(document.documentElement.lang);
  // The words, in the page's language (<body data-words>, blueprints/words.py).
  const words = JSON.parse(document.body.dataset.words || "{}");
  const text = (key, value = "") => (words[key] || key).replace("%s", value);

  async function fetchOk(url, accept) {
    const response = await fetch(url, { headers: { Accept: accept }, credentials: "same-origin" });
    if (response.redirected) throw new Error(text("session_ended"));
    if (!response.ok) throw new Error(text("server_answered", response.status));
    return response;
  }

  function fill(scope, item) {
    scope.querySelectorAll("[data-field]").forEach((element) => {
      const name = element.dataset.field;
      const value = item.display && name in item.display ? item.display[name] : item[name];
      element.textContent = value ?? "";
    });
    scope.querySelectorAll("a[data-link]").forEach((link) => {
      if (item.url) link.href = item.url;
    });
    if (item.values) {
      scope.classList.toggle("is-paused", Boolean(item.values.paused));
      scope.classList.toggle("is-unserved", Boolean(item.values.unserved));
    }
  }

  function fillRows(body, template, items) {
    const existing = new Map([...body.children].map((row) => [row.dataset.key, row]));
    const rows = items.map((item) => {
      const row = existing.get(item.queue) || template.content.firstElementChild.cloneNode(true);
      row.dataset.key = item.queue;
      fill(row, item);
      return row;
    });
    body.replaceChildren(...rows);
  }

  async function refreshFigures(region) {
    const data = await (await fetchOk(region.dataset.liveFigures, "application/json")).json();
    const totals = region.querySelector("[data-totals]");
    if (totals) fill(totals, data.totals);
    const body = region.querySelector("[data-rows]");
    const template = region.querySelector("template[data-row]");
    if (body && template) fillRows(body, template, data.queues);
  }

  async function refreshHtml(region) {
    if (region.querySelector("[data-live-done]")) return;
    const response = await fetchOk(region.dataset.liveHtml, "text/html");
    region.innerHTML = await response.text(); // rendered and escaped by the server
  }

  async function tick() {
    if (busy || document.hidden || (toggle && !toggle.checked)) return;
    busy = true;
    document.dispatchEvent(new CustomEvent("pauta:refresh"));
    const figures = [...document.querySelectorAll("[data-live-figures]")].map(refreshFigures);
    const fragments = [...document.querySelectorAll("[data-live-html]")].map(refreshHtml);
    try {
      await Promise.all([...figures, ...fragments]);
      say(text("updated", clock()));
    } catch (error) {
      say(text("not_updated", error.message), true);
    } finally {
      busy = false;
    }
  }

  if (toggle) {
    toggle.checked = localStorage.getItem(STORE_KEY) !== "paused";
    say(toggle.checked ? "" : text("paused"));
    toggle.addEventListener("change", () => {
      localStorage.setItem(STORE_KEY, toggle.checked ? "live" : "paused");
      if (toggle.checked) tick();
      else say(text("paused"));
    });
  }
  window.setInterval(tick, INTERVAL_MS);

  // Choosing a tenant shows it at once; the "Show" button is there for browsers without script.
  document.querySelectorAll("[data-autosubmit]").forEach((select) => {
    select.addEventListener("change", () => select.form.requestSubmit());
  });
})();
