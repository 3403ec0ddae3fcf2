/* onnxcost HTML report: charts (Vega-Lite via vega-embed), sortable and filterable tables.
   Every string from the model reaches the page through textContent, never as markup. */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("onnxcost-data").textContent);

  function trim(x) { return x.toPrecision(3).replace(/\.?0+$/, ""); }
  function count(v) {
    if (v === null || v === undefined) return "-";
    var units = ["", " K", " M", " G", " T", " P"], i = 0, x = Number(v);
    if (Math.abs(x) < 1000) return String(Math.round(x));
    while (Math.abs(x) >= 1000 && i < units.length - 1) { x /= 1000; i++; }
    return (Math.abs(x) >= 100 ? trim(x) : x.toFixed(2)) + units[i];
  }
  function nbytes(v) {
    if (v === null || v === undefined) return "-";
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0, x = Number(v);
    if (Math.abs(x) < 1024) return Math.round(x) + " B";
    while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    return x.toFixed(2) + " " + units[i];
  }
  var FORMAT = {
    count: count,
    bytes: nbytes,
    int: function (v) { return v === null || v === undefined ? "-" : Number(v).toLocaleString("en-US"); },
    us: function (v) { return v === null || v === undefined ? "-" : Number(v).toFixed(1); },
    ms: function (v) { return v === null || v === undefined ? "-" : Number(v).toFixed(3); },
    pct: function (v) { return v === null || v === undefined ? "-" : (100 * v).toFixed(2) + "%"; },
    rate: function (v) { return v === null || v === undefined ? "-" : Number(v).toFixed(2); },
    text: function (v) { return v === null || v === undefined ? "" : String(v); },
    plain: function (v) { return v === null || v === undefined ? "" : String(v); }
  };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // A name's text with a line break allowed after each "/" and "+" (<wbr>: nothing added to
  // what is copied): a node in its module, /gpt2/transformer/h.0/mlp/c_fc/node_Gemm_1357, or
  // the nodes one kernel ran, node_mul_180+node_pow_1, wrap between their parts.
  function breakable(td, text) {
    var parts = text.split(/(?<=[\/+])/);
    for (var k = 0; k < parts.length; k++) {
      if (k) td.appendChild(document.createElement("wbr"));
      td.appendChild(document.createTextNode(parts[k]));
    }
  }

  function makeTable(spec) {
    var host = document.getElementById(spec.id);
    if (!host) return;
    var cols = spec.columns, rows = spec.rows, page = spec.page || 200;
    var shown = page, sortCol = spec.sort === undefined ? -1 : spec.sort, sortDesc = true;
    var view = rows.slice();
    var tools = el("div", "tbl-tools");
    var input = el("input");
    input.type = "search";
    input.placeholder = spec.placeholder || "filter rows (regular expression)";
    var info = el("span", "note");
    tools.appendChild(input);
    tools.appendChild(info);
    var wrap = el("div", "tbl-wrap");
    var table = el("table");
    var thead = el("thead"), htr = el("tr"), tbody = el("tbody");
    var ths = cols.map(function (c, i) {
      var th = el("th", "sortable" + (c.numeric ? " num" : ""), c.label);
      th.title = "sort by " + c.label;
      th.addEventListener("click", function () {
        if (sortCol === i) { sortDesc = !sortDesc; } else { sortCol = i; sortDesc = !!c.numeric; }
        apply();
      });
      htr.appendChild(th);
      return th;
    });
    thead.appendChild(htr);
    table.appendChild(thead);
    table.appendChild(tbody);
    wrap.appendChild(table);
    var more = el("button", "", "show more");
    more.addEventListener("click", function () { shown += page * 5; draw(); });
    host.appendChild(tools);
    host.appendChild(wrap);
    host.appendChild(more);
    var textCols = cols.map(function (c, i) { return c.numeric ? -1 : i; }).filter(function (i) { return i >= 0; });

    function apply() {
      var q = input.value.trim(), test = null;
      if (q) {
        try { var re = new RegExp(q, "i"); test = function (s) { return re.test(s); }; }
        catch (e) { var low = q.toLowerCase(); test = function (s) { return s.toLowerCase().indexOf(low) >= 0; }; }
      }
      view = test ? rows.filter(function (r) {
        return textCols.some(function (i) { return r[i] !== null && test(String(r[i])); });
      }) : rows.slice();
      if (sortCol >= 0) {
        var k = sortCol, numeric = cols[k].numeric, sign = sortDesc ? -1 : 1;
        view.sort(function (a, b) {
          var x = a[k], y = b[k];
          if (x === null || x === undefined) return 1;
          if (y === null || y === undefined) return -1;
          if (numeric) return sign * (x - y);
          return sign * String(x).localeCompare(String(y));
        });
      }
      ths.forEach(function (th, i) {
        th.textContent = cols[i].label;
        if (i === sortCol) th.appendChild(el("span", "arrow", sortDesc ? " ▼" : " ▲"));
      });
      shown = page;
      draw();
    }
    function draw() {
      var frag = document.createDocumentFragment(), n = Math.min(shown, view.length);
      for (var r = 0; r < n; r++) {
        var tr = el("tr"), row = view[r];
        for (var i = 0; i < cols.length; i++) {
          var c = cols[i], v = row[i];
          var td = el("td", c.numeric ? "num" : (c.kind === "text" ? "text" : "plain"));
          if (c.kind === "text" || !c.kind) breakable(td, FORMAT.text(v));
          else td.textContent = FORMAT[c.kind](v);
          if (c.numeric && v !== null && v !== undefined && (c.kind === "count" || c.kind === "bytes")) td.title = Number(v).toLocaleString("en-US");
          tr.appendChild(td);
        }
        frag.appendChild(tr);
      }
      tbody.textContent = "";
      tbody.appendChild(frag);
      info.textContent = n + " of " + view.length + " rows" + (view.length !== rows.length ? " (" + rows.length + " in all)" : "");
      more.style.display = n < view.length ? "" : "none";
    }
    input.addEventListener("input", apply);
    apply();
  }

  (DATA.tables || []).forEach(makeTable);

  document.querySelectorAll("[data-tree-toggle]").forEach(function (b) {
    b.addEventListener("click", function () {
      var open = b.getAttribute("data-tree-toggle") === "open";
      document.querySelectorAll("#" + b.getAttribute("data-target") + " details").forEach(function (d) { d.open = open; });
    });
  });

  var charts = DATA.charts || {};
  var pending = Object.keys(charts).map(function (id) {
    var host = document.getElementById(id);
    if (!host || typeof vegaEmbed === "undefined") return Promise.resolve();
    return vegaEmbed(host, charts[id], { actions: false, renderer: "svg" }).catch(function (e) {
      host.textContent = "chart failed: " + e;
    });
  });
  Promise.all(pending).then(function () { document.body.setAttribute("data-ready", "1"); });
})();
