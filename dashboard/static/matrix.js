// Draws the operator matrix from its lazily loaded data, then wires the
// filters.  Two views of the same data: the heatmap (one row per operator, one
// cell per dtype, the variants folded in: the cell takes the most important
// state of its variants, the one a row cell would show first) and the rows
// (one row per operator and variant, as the downloads hold them).  The filters
// act on the rows; the heatmap folds only the rows they leave, so both views
// always agree.  Every text goes in through textContent or title (operator
// names come from the tests).  The rows are the view a page opens with (the
// heatmap is drawn when first asked for, so the page costs what it did); the
// view is kept in the URL's hash as view=heatmap.
(function () {
  "use strict";
  var TC = window.TC, cfg = TC.matrixData;
  var table = document.getElementById("matrix"), status = document.getElementById("matrix-status");
  var heat = document.getElementById("heatmap"), detail = document.getElementById("heat-detail");
  var form = document.getElementById("matrix-form");
  var buttons = document.querySelectorAll("[data-view]");

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }
  function countsText(data, nums) {
    var parts = [];
    nums.forEach(function (n, k) { if (n) { parts.push(data.counts[k] + " " + n); } });
    return parts.join(", ");
  }

  // -- the heatmap's cell of one operator and dtype: its variants' cells folded ---------
  function fold(data, rows, j) {
    var cell = { state: -1, passed: 0, run: 0, nums: null, variants: [] };
    rows.forEach(function (entry) {
      var c = entry.r[2][j];
      if (!c || entry.tr.hidden) { return; }
      if (cell.state === -1 || c[0] < cell.state) { cell.state = c[0]; }   // states are ordered, most important first
      cell.passed += c[1];
      cell.run += c[2];
      cell.nums = cell.nums ? cell.nums.map(function (n, k) { return n + c[3][k]; }) : c[3].slice();
      cell.variants.push({ variant: entry.r[1], state: c[0], passed: c[1], run: c[2], nums: c[3] });
    });
    return cell;
  }
  function tooltip(data, op, dtype, cell) {
    var s = data.states[cell.state], n = cell.variants.length;
    var lines = [op + " \u00b7 " + dtype + ": " + s.label + (n > 1 ? " (most important of " + n + " variants)" : " (1 variant)") +
                 ", " + cell.passed + "/" + cell.run + " passed/run"];
    cell.variants.forEach(function (v) {
      lines.push(v.variant + ": " + data.states[v.state].symbol + " " + data.states[v.state].label + " " + v.passed + "/" + v.run +
                 " (" + countsText(data, v.nums) + ")");
    });
    return lines.join("\n");
  }

  function showDetail(data, op, dtype, cell) {
    detail.textContent = "";
    detail.appendChild(el("h2", op + " \u00b7 " + dtype));
    var list = el("ul", undefined, "variants");
    cell.variants.forEach(function (v) {
      var s = data.states[v.state], li = el("li");
      var sw = el("span", s.symbol, "swatch c-" + s.key);
      sw.setAttribute("aria-hidden", "true");
      li.appendChild(sw);
      li.appendChild(document.createTextNode(" " + v.variant + ": " + s.label + ", " + v.passed + "/" + v.run +
                                             " passed/run (" + countsText(data, v.nums) + ")"));
      list.appendChild(li);
    });
    detail.appendChild(list);
    var rowsButton = el("button", "Show the rows of " + op);
    rowsButton.type = "button";
    rowsButton.addEventListener("click", function () {
      form.elements.op.value = op;
      form.elements.op.dispatchEvent(new Event("input", { bubbles: true }));
      setView("rows");
    });
    detail.appendChild(rowsButton);
    detail.hidden = false;
  }

  var drawHeat = function () {};
  function drawHeatmap(data) {
    var byOp = [], at = {};
    Array.prototype.forEach.call(table.tBodies[0].rows, function (tr, k) {
      var r = data.rows[k];
      if (!at.hasOwnProperty(r[0])) { at[r[0]] = byOp.length; byOp.push({ op: r[0], rows: [] }); }
      byOp[at[r[0]]].rows.push({ r: r, tr: tr });
    });
    var head = el("tr");
    ["operator"].concat(data.dtypes).forEach(function (h) { var th = el("th", h); th.scope = "col"; head.appendChild(th); });
    heat.tHead.appendChild(head);
    drawHeat = function () {
      var body = document.createDocumentFragment(), shown = 0;
      byOp.forEach(function (o) {
        if (o.rows.every(function (e) { return e.tr.hidden; })) { return; }
        shown++;
        var tr = el("tr"), th = el("th", o.op);
        th.scope = "row";
        tr.setAttribute("data-op", o.op);
        tr.appendChild(th);
        data.dtypes.forEach(function (dtype, j) {
          var cell = fold(data, o.rows, j);
          if (cell.state === -1) { tr.appendChild(el("td", "", "cell none")); return; }
          var s = data.states[cell.state];
          var td = el("td", s.symbol + " " + cell.passed + "/" + cell.run, "cell c-" + s.key);
          td.tabIndex = 0;
          td.setAttribute("data-dtype", dtype);
          td.setAttribute("data-state", s.key);
          td.title = tooltip(data, o.op, dtype, cell);
          var open = function () { showDetail(data, o.op, dtype, cell); };
          td.addEventListener("click", open);
          td.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(); } });
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      heat.tBodies[0].textContent = "";
      heat.tBodies[0].appendChild(body);
      document.getElementById("heat-count").textContent = shown + " of " + byOp.length + " operators";
    };
    drawHeat();
  }

  // -- the view: "rows" (the default) or "heatmap", kept in the URL's hash as view=heatmap
  var DEFAULT_VIEW = "rows";
  var asked = new URLSearchParams(location.hash.slice(1)).get("view");
  var view = asked === "heatmap" || asked === "rows" ? asked : DEFAULT_VIEW;
  var loaded = null;   // the matrix data, once drawn
  function keepViewInHash() {
    var p = new URLSearchParams(location.hash.slice(1));
    if (view !== DEFAULT_VIEW) { p.set("view", view); } else { p.delete("view"); }
    history.replaceState(null, "", p.toString() ? "#" + p.toString() : location.pathname);
  }
  function setView(v) {
    view = v;
    if (v === "heatmap" && heat.tHead.rows.length === 0) { drawHeatmap(loaded); }
    document.getElementById("heat-view").hidden = v !== "heatmap";
    document.getElementById("rows-view").hidden = v !== "rows";
    document.getElementById("heat-count").hidden = v !== "heatmap";
    Array.prototype.forEach.call(buttons, function (b) { b.setAttribute("aria-pressed", String(b.getAttribute("data-view") === v)); });
    keepViewInHash();
  }

  // a cell of the data file, [state, i, n, ...] over its non-zero counts (pages/matrix.py
  // ``compact``), as [state, passed, run, counts]
  function expand(data) {
    var pass = data.counts.indexOf("pass"), fallback = data.counts.indexOf("pass_fallback");
    var eligibility = data.counts.indexOf("skip_eligibility");
    data.rows.forEach(function (r) {
      r[2] = r[2].map(function (c) {
        if (!c) { return 0; }
        var nums = data.counts.map(function () { return 0; }), run = 0;
        for (var k = 1; k < c.length; k += 2) { nums[c[k]] = c[k + 1]; }
        for (var j = 0; j < data.outcomes; j++) { run += nums[j]; }
        return [c[0], nums[pass] + nums[fallback], run - nums[eligibility], nums];
      });
    });
  }
  // the downloads' rows: one per cell, as pages/matrix.py ``records`` reads them
  function downloadRows(data) {
    var out = [];
    data.rows.forEach(function (r) {
      r[2].forEach(function (c, j) {
        if (c) { out.push([r[0], r[1], data.dtypes[j], data.states[c[0]].key].concat(c[3])); }
      });
    });
    return out;
  }

  TC.load(cfg.src, cfg.key).then(function (data) {
    if (!data.expanded) { expand(data); data.expanded = true; }
    var downloads = form.querySelector(".downloads.made");
    if (downloads) { TC.offerDownloads(downloads, cfg.columns, function () { return downloadRows(data); }); }
    var head = el("tr");
    ["operator", "variant"].concat(data.dtypes).forEach(function (h) {
      var th = el("th", h); th.scope = "col"; head.appendChild(th);
    });
    table.tHead.appendChild(head);
    var body = document.createDocumentFragment();
    data.rows.forEach(function (r) {
      var tr = el("tr"), states = {};
      tr.setAttribute("data-op", r[0]);
      tr.setAttribute("data-variant", r[1]);
      var th = el("th", r[0]); th.scope = "row"; tr.appendChild(th);
      tr.appendChild(el("td", r[1]));
      r[2].forEach(function (c, j) {
        if (!c) { tr.appendChild(el("td", "", "cell none")); return; }
        var s = data.states[c[0]];
        states[s.key] = true;
        var td = el("td", s.symbol + " " + c[1] + "/" + c[2], "cell c-" + s.key);
        td.tabIndex = 0;
        td.title = r[0] + " " + r[1] + " " + data.dtypes[j] + ": " + s.label + "; " + countsText(data, c[3]);
        tr.appendChild(td);
      });
      tr.setAttribute("data-states", Object.keys(states).sort().join(" "));
      body.appendChild(tr);
    });
    table.tBodies[0].appendChild(body);
    table.hidden = false;
    heat.hidden = false;
    status.textContent = "";
    loaded = data;
    TC.wireMatrix(form, table);   // filters the rows (and may apply a permalink's filters now)
    // after the rows' filter has run: fold what it left, keep the view in the hash it rewrote
    var refresh = function () { drawHeat(); detail.hidden = true; keepViewInHash(); };
    form.addEventListener("input", refresh);
    form.addEventListener("change", refresh);
    Array.prototype.forEach.call(buttons, function (b) {
      b.addEventListener("click", function () { setView(b.getAttribute("data-view")); });
    });
    setView(view);
  }, function (err) { status.textContent = String(err.message || err); });
})();
