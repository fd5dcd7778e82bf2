"use strict";
// The console's graphs. Every <canvas data-chart=KIND data-source=URL> is drawn with Chart.js
// (bundled from npm into the same file as this script) from the JSON at URL, and drawn again
// with fresh data on the live refresh ("pauta:refresh") once data-every seconds have passed.
// KIND is one of: throughput (stacked bars), timing and depth (lines).
(() => {
  const Chart = window.Chart;
  if (!Chart) return;
  Chart.defaults.font.family = "system-ui, sans-serif";
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;

  const COLORS = {
    succeeded: "#12b76a", failed: "#f79009", dead: "#d92d20",
    runtime_avg: "#2f5bd3", runtime_max: "#84adff", wait_avg: "#7a5af8", wait_max: "#bdb4fe",
    available: "#2f5bd3", scheduled: "#7a5af8", running: "#12b76a",
  };
  const LABELS = {
    succeeded: "succeeded", failed: "retried", dead: "dead",
    runtime_avg: "run avg", runtime_max: "run max", wait_avg: "wait avg", wait_max: "wait max",
    available: "waiting", scheduled: "scheduled", running: "running",
  };

  const ORDER = {
    throughput: ["succeeded", "failed", "dead"],
    timing: ["runtime_avg", "runtime_max", "wait_avg", "wait_max"],
    depth: ["available", "scheduled", "running", "dead"],
  };
  const datasets = (block, names, extra) => names.map((name) => ({
    label: LABELS[name],
    data: block[name],
    borderColor: COLORS[name],
    backgroundColor: COLORS[name],
    pointRadius: 2,
    borderWidth: 2,
    ...extra,
  }));
  const axis = (title, stacked = false) => ({
    x: { stacked, ticks: { maxTicksLimit: 12, maxRotation: 0 } },
    y: { stacked, beginAtZero: true, title: { display: true, text: title } },
  });
  const interaction = { mode: "index", intersect: false };

  const KINDS = {
    throughput: (data) => ({
      type: "bar",
      data: { labels: data.labels, datasets: datasets(data.throughput, ORDER.throughput, { stack: "outcomes" }) },
      options: { scales: axis("attempts per minute", true), interaction },
    }),
    timing: (data) => ({
      type: "line",
      data: { labels: data.labels, datasets: datasets(data.timing, ORDER.timing, { spanGaps: true }) },
      options: { scales: axis("seconds"), interaction },
    }),
    depth: (data) => ({
      type: "line",
      data: { labels: data.labels, datasets: datasets(data.depth, ORDER.depth, { spanGaps: true }) },
      options: { scales: axis("jobs"), interaction },
    }),
  };

  async function draw(canvas) {
    const response = await fetch(canvas.dataset.source, {
      headers: { Accept: "application/json" }, credentials: "same-origin",
    });
    if (!response.ok || response.redirected) throw new Error(`HTTP ${response.status}`);
    const config = KINDS[canvas.dataset.chart](await response.json());
    const chart = Chart.getChart(canvas);
    if (chart) {
      chart.data = config.data;
      chart.update("none");
    } else {
      new Chart(canvas, config);
    }
    canvas.dataset.drawnAt = String(Date.now());
    delete canvas.dataset.error;
  }

  const canvases = [...document.querySelectorAll("canvas[data-chart]")];
  const drawDue = (force) => canvases.forEach((canvas) => {
    const every = Number(canvas.dataset.every || 60) * 1000;
    if (!force && Date.now() - Number(canvas.dataset.drawnAt || 0) < every - 500) return;
    draw(canvas).catch((error) => { canvas.dataset.error = error.message; });
  });
  drawDue(true);
  document.addEventListener("pauta:refresh", () => drawDue(false));
})();
