// oars studio: the little the pages need beyond htmx. Pages work without JavaScript for reading.
// Curves: <div class="curves" data-series-url="/runs/ID/scalars.json"> draws every series it returns with uPlot.
"use strict";
window.oarsStudio = {
  // data: {x: [..], series: {name: [..]}, x_label: "iter"}; el: the container (its width is used)
  drawCurves(el, data) {
    const names = Object.keys(data.series || {});
    el.innerHTML = "";
    if (!names.length || !data.x || !data.x.length) { el.textContent = "no values yet"; return null; }
    const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
    const opts = {
      width: Math.max(320, el.clientWidth || 640), height: 260,
      scales: {x: {time: false}},
      axes: [{label: data.x_label || "iter"}, {}],
      series: [{label: data.x_label || "iter"}].concat(names.map((n, i) => ({label: n, stroke: palette[i % palette.length], width: 2, spanGaps: true}))),
    };
    return new uPlot(opts, [data.x].concat(names.map(n => data.series[n])), el);
  },
  loadCurves(el) {
    return fetch(el.dataset.seriesUrl, {headers: {Accept: "application/json"}})
      .then(r => r.json()).then(d => { el._data = d; el._plot = oarsStudio.drawCurves(el, d); });
  },
  // a live run page's event: <script id="run-points"> holds {loss|lr|other|val: {x, series}}, the points logged
  // since the page drew its curves; each plot appends its part (a plot not drawn yet, or a new series: fetched whole)
  takePoints(tag) {
    if (!tag) return;
    const points = JSON.parse(tag.textContent);
    tag.remove();
    document.querySelectorAll(".curves[data-series-url]").forEach((el) => {
      const part = new URL(el.dataset.seriesUrl, location.href).searchParams.get("part") || "loss";
      const add = points[part];
      if (!add || !add.x || !add.x.length) return;
      const data = el._data;
      if (!el._plot || !data || Object.keys(add.series).some(n => !(n in data.series))) { oarsStudio.loadCurves(el); return; }
      const names = Object.keys(data.series);
      let last = data.x.length ? data.x[data.x.length - 1] : -Infinity;
      add.x.forEach((x, i) => {
        if (x <= last) return;  // already drawn (the page's own fetch came after these lines)
        data.x.push(x);
        names.forEach(n => data.series[n].push(n in add.series ? add.series[n][i] : null));
        last = x;
      });
      el._plot.setData([data.x].concat(names.map(n => data.series[n])));
    });
  },
};
document.addEventListener("DOMContentLoaded", () => document.querySelectorAll(".curves[data-series-url]").forEach(oarsStudio.loadCurves));
document.addEventListener("htmx:afterSettle", (e) => e.target.querySelectorAll && e.target.querySelectorAll(".curves[data-series-url]").forEach(oarsStudio.loadCurves));
