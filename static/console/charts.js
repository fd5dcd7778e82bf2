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
  // The words come from the page, in the reader's language: data-labels on the canvas holds
  // each series' name and each axis' title (blueprints/words.py, CHART_WORDS).

  const ORDER = {
    throughput: ["succeeded", "failed", "dead"],
    timing: ["runtime_avg", "runtime_max", "wait_avg", "wait_max"],
    depth: ["available", "scheduled", "running", "dead"],
  };
  const datasets = (block, names, words, extra) => names.map((name) => ({
    label: words[name] || name,
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
    throughput: (data, words) => ({
      type: "bar",
      data: { labels: data.labels, datasets: datasets(data.throughput, ORDER.throughput, words, { stack: "outcomes" }) },
      options: { scales: axis(words.axis_throughput, true), interaction },
    }),
    timing: (data, words) => ({
      type: "line",
      data: { labels: data.labels, datasets: datasets(data.timing, ORDER.timing, words, { spanGaps: true }) },
      options: { scales: axis(words.axis_timing), interaction },
    }),
    depth: (data, words) => ({
      type: "line",
      data: { labels: data.labels, datasets: datasets(data.depth, ORDER.depth, words, { spanGaps: true }) },
      options: { scales: axis(words.axis_depth), interaction },
    }),
  };

  async function draw(canvas) {
    const response = await fetch(canvas.dataset.source, {
      headers: { Accept: "application/json" }, credentials: "same-origin",
    });
    if (!response.ok || response.redirected) throw new Error(`HTTP ${response.status}`);
    const words = JSON.parse(canvas.dataset.labels || "{}");
    const config = KINDS[canvas.dataset.chart](await response.json(), words);
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
