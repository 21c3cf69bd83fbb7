// torchconform site: table filters, sorting, the matrix filter and lazy data
// loading.  Plain JavaScript, no dependencies; works from file://.
(function () {
  "use strict";
  var TC = window.TC = window.TC || {};
  var pending = {};

  // Data files call TC.loaded(key, payload); TC.load(src, key) injects the
  // <script> (fetch() is refused on file:// URLs, script tags are not).
  TC.data = {};
  TC.loaded = function (key, payload) {
    TC.data[key] = payload;
    if (pending[key]) { pending[key].resolve(payload); }
  };
  TC.load = function (src, key) {
    if (TC.data[key]) { return Promise.resolve(TC.data[key]); }
    if (pending[key]) { return pending[key].promise; }
    var entry = {};
    entry.promise = new Promise(function (resolve, reject) {
      entry.resolve = resolve;
      var s = document.createElement("script");
      s.src = src;
      s.async = true;
      s.onerror = function () { delete pending[key]; reject(new Error("could not load " + src)); };
      document.head.appendChild(s);
    });
    pending[key] = entry;
    return entry.promise;
  };

  // The compact encodings of the data files (dashboard/encoding.py): base-64 digit
  // columns, front-coded test ids, bitmaps.
  var DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_", VALUE = {};
  for (var d = 0; d < DIGITS.length; d++) { VALUE[DIGITS.charAt(d)] = d; }
  // a {width, codes} column of n numbers (a width-0 column is n zeros)
  TC.column = function (col, n) {
    var out = new Int32Array(n), w = col.width, codes = col.codes;
    if (!w) { return out; }
    for (var i = 0, p = 0; i < n; i++) {
      var x = 0;
      for (var k = 0; k < w; k++) { x = x * 64 + VALUE[codes.charAt(p++)]; }
      out[i] = x;
    }
    return out;
  };
  // encoding.code_ids: [[shared prefix, [entry, ...]], ...], an entry a digit (characters shared
  // with the previous rest) and the rest, or a number k: k positions without a test (null)
  TC.expandIds = function (groups) {
    var out = [];
    groups.forEach(function (g) {
      var last = "";
      g[1].forEach(function (e) {
        if (typeof e === "number") { for (var k = 0; k < e; k++) { out.push(null); } return; }
        last = last.slice(0, VALUE[e.charAt(0)]) + e.slice(1);
        out.push(g[0] + last);
      });
    });
    return out;
  };
  TC.bit = function (text, i) { return (VALUE[text.charAt((i / 6) | 0)] >> (i % 6)) & 1; };

  // data/tests.js (dashboard/positions.py): every test id by position; ``shown(i)``: whether
  // some build of the site has the test at position i; ``order``: positions in id order.
  TC.testIndex = function (root) {
    return TC.load(root + "data/tests.js", "tests").then(function (data) {
      if (!data.ids) {
        data.ids = TC.expandIds(data.groups);
        data.shownAt = function (i) { return data.ids[i] !== null && (data.shown == null || TC.bit(data.shown, i) === 1); };
        var order = [];
        for (var i = 0; i < data.ids.length; i++) { if (data.shownAt(i)) { order.push(i); } }
        if (!data.sorted) {   // positions added since the numbering was made come after it
          order.sort(function (a, b) { return data.ids[a] < data.ids[b] ? -1 : data.ids[a] > data.ids[b] ? 1 : 0; });
        }
        data.order = order;
      }
      return data;
    });
  };
  // data/builds/<slug>.js: a build's outcome code per position (pages/search.py)
  TC.buildCodes = function (root, slug) {
    return TC.load(root + "data/builds/" + encodeURIComponent(slug) + ".js", "build:" + slug);
  };
  // the positions (ascending) whose code is one of ``codes``
  function positionsWith(build, codes) {
    build.with = build.with || {};
    if (!build.with[codes]) {
      var out = [], c = build.codes;
      for (var i = 0; i < c.length; i++) { if (codes.indexOf(c.charAt(i)) !== -1) { out.push(i); } }
      build.with[codes] = out;
    }
    return build.with[codes];
  }
  // a build's missing operator at each position with code M
  TC.missingOps = function (build) {
    if (!build.missingAt) {
      var at = positionsWith(build, "M"), numbers = TC.column(build.missing, at.length), map = {};
      at.forEach(function (p, k) { if (numbers[k]) { map[p] = build.missing_ops[numbers[k] - 1]; } });
      build.missingAt = map;
    }
    return build.missingAt;
  };

  // A build's failure data (data/failures/<slug>/, see dashboard/failures.py): an
  // index (labels, ops, repro commands, clusters) and chunks of rows; row k is the test at the
  // k-th position whose code in the build's data/builds file is a failure code (index.codes).
  // A row becomes {test, pos, label, message, op, cluster, r};
  // TC.repro(index, f) joins its repro command from its parts (0: id, 1: op).
  function failuresAt(root, slug) { return root + "data/failures/" + encodeURIComponent(slug) + "/"; }
  TC.failureIndex = function (root, slug) { return TC.load(failuresAt(root, slug) + "index.js", "failures:" + slug); };
  TC.failureChunk = function (root, slug, index, k) {
    return Promise.all([TC.load(failuresAt(root, slug) + k + ".js", "failures:" + slug + ":" + k),
                        TC.testIndex(root), TC.buildCodes(root, slug)]).then(function (got) {
      var chunk = got[0], ids = got[1].ids, at = positionsWith(got[2], index.codes);
      if (chunk.decoded) { return chunk.decoded; }
      var start = k * index.chunk, n = Math.min(index.chunk, index.tests - start), col = {};
      ["label", "message", "repro", "op", "cluster"].forEach(function (c) { col[c] = TC.column(chunk[c], n); });
      var shared = index.messages.length, list = [], byPos = {};
      for (var j = 0; j < n; j++) {
        var pos = at[start + j], m = col.message[j];
        var f = { test: ids[pos], pos: pos, label: index.labels[col.label[j]],
                  message: m < shared ? index.messages[m] : chunk.messages[m - shared],
                  r: col.repro[j], op: index.ops[col.op[j]], cluster: col.cluster[j] - 1 };
        list.push(f);
        byPos[pos] = f;
      }
      chunk.decoded = { list: list, byPos: byPos };
      return chunk.decoded;
    });
  };
  // every failure of a build, in position order
  TC.allFailures = function (root, slug, index) {
    var ks = [];
    for (var k = 0; k < index.chunks; k++) { ks.push(k); }
    return Promise.all(ks.map(function (k) { return TC.failureChunk(root, slug, index, k); }))
      .then(function (chunks) { return [].concat.apply([], chunks.map(function (c) { return c.list; })); });
  };
  // the failure of the test at position ``pos`` in a build (null: none), from the one chunk holding it
  TC.findFailure = function (root, slug, pos) {
    return Promise.all([TC.failureIndex(root, slug), TC.buildCodes(root, slug)]).then(function (got) {
      var index = got[0], at = positionsWith(got[1], index.codes), lo = 0, hi = at.length - 1;
      while (lo < hi) {
        var mid = (lo + hi) >> 1;
        if (at[mid] < pos) { lo = mid + 1; } else { hi = mid; }
      }
      if (!at.length || at[lo] !== pos) { return null; }
      return TC.failureChunk(root, slug, index, Math.floor(lo / index.chunk)).then(function (c) {
        return c.byPos[pos] ? { index: index, f: c.byPos[pos] } : null;
      });
    });
  };
  TC.repro = function (index, f) {
    return index.repros[f.r].map(function (p) { return p === 0 ? f.test : p === 1 ? f.op : p; }).join("");
  };

  // Downloads of a table the page draws from its data: the links inside ``box`` (data-format
  // json / csv) get a file made in the browser when followed: the records (one object per row,
  // keyed by ``columns``) or CSV as the site's download files are written (tables.py: a cell
  // that starts like a spreadsheet formula is written as text).  ``rows()``: the rows, when asked.
  function csvCell(v) {
    if (v === null || v === undefined) { return ""; }
    var s = String(v);
    if (typeof v === "string" && /^[=+\-@\t\r]/.test(s)) { s = "'" + s; }
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  TC.csv = function (columns, rows) {
    return [columns].concat(rows).map(function (r) { return r.map(csvCell).join(","); }).join("\n") + "\n";
  };
  TC.records = function (columns, rows) {
    return rows.map(function (r) { var o = {}; columns.forEach(function (c, k) { o[c] = r[k]; }); return o; });
  };
  TC.offerDownloads = function (box, columns, rows) {
    Array.prototype.forEach.call(box.querySelectorAll("a[data-format]"), function (a) {
      a.addEventListener("click", function () {
        // made when followed: the link's default action reads the href after this handler
        var json = a.getAttribute("data-format") === "json";
        var text = json ? JSON.stringify(TC.records(columns, rows())) : TC.csv(columns, rows());
        if (a.href.indexOf("blob:") === 0) { URL.revokeObjectURL(a.href); }
        a.href = URL.createObjectURL(new Blob([text], { type: json ? "application/json" : "text/csv" }));
      });
    });
  };

  function rowsOf(table) { return Array.prototype.slice.call(table.tBodies[0].rows); }
  function setCount(id, shown, total) {
    var el = document.querySelector('[data-count-for="' + id + '"]');
    if (el) { el.textContent = shown === total ? total + " rows" : shown + " of " + total + " rows"; }
  }

  // Free-text filter over every cell of a table.
  function wireFilter(input) {
    var table = document.getElementById(input.getAttribute("data-filter-table"));
    if (!table) { return; }
    var rows = rowsOf(table);
    var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase(), shown = 0;
      rows.forEach(function (r, i) {
        var hit = !q || texts[i].indexOf(q) !== -1;
        r.hidden = !hit;
        if (hit) { shown++; }
      });
      setCount(table.id, shown, rows.length);
    });
  }

  // Sort by a column; numbers numerically.  Buttons make it keyboard-usable.
  function wireSort(button) {
    button.addEventListener("click", function () {
      var table = button.closest("table"), col = +button.getAttribute("data-col");
      var asc = button.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("button.sort").forEach(function (b) { b.removeAttribute("aria-sort"); });
      button.setAttribute("aria-sort", asc ? "ascending" : "descending");
      button.setAttribute("data-arrow", asc ? "\u25B2" : "\u25BC");
      var rows = rowsOf(table);
      var key = function (r) {
        var t = (r.cells[col] || {}).textContent || "";
        var n = parseFloat(t.replace(/,/g, ""));
        return isNaN(n) || /[^\d.,%\s-]/.test(t) ? t.toLowerCase() : n;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x !== typeof y) { x = String(x); y = String(y); }
        return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
      });
      var body = table.tBodies[0];
      rows.forEach(function (r) { body.appendChild(r); });
    });
  }

  // A filter form over a table's rows: ``tests`` maps each form field's name to
  // test(row, value) -> bool; a row is shown when every non-empty field's test holds.
  // The fields are kept in the URL's hash, so a permalink reopens the table filtered.
  TC.wireRows = function (form, table, tests) {
    var rows = rowsOf(table), names = Object.keys(tests);
    var apply = function () {
      var values = {}, shown = 0, params = new URLSearchParams();
      names.forEach(function (k) { values[k] = form.elements[k].value.trim(); if (values[k]) { params.set(k, values[k]); } });
      rows.forEach(function (r) {
        var ok = names.every(function (k) { return !values[k] || tests[k](r, values[k]); });
        r.hidden = !ok;
        if (ok) { shown++; }
      });
      setCount(table.id, shown, rows.length);
      history.replaceState(null, "", params.toString() ? "#" + params.toString() : location.pathname);
    };
    form.addEventListener("input", apply);
    form.addEventListener("change", apply);
    var initial = new URLSearchParams(location.hash.slice(1));
    names.forEach(function (k) { if (initial.get(k)) { form.elements[k].value = initial.get(k); } });
    if (location.hash.length > 1) { apply(); }
  };

  // The operator matrix: operator text, variant and "has a cell in state".
  TC.wireMatrix = function (form, table) {
    TC.wireRows(form, table, {
      op: function (r, v) { return r.getAttribute("data-op").toLowerCase().indexOf(v.toLowerCase()) !== -1; },
      variant: function (r, v) { return r.getAttribute("data-variant") === v; },
      state: function (r, v) { return (" " + r.getAttribute("data-states") + " ").indexOf(" " + v + " ") !== -1; }
    });
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("input[data-filter-table]").forEach(wireFilter);
    // a lazily drawn table sorts its data, not the rows on the page (static/diff.js)
    document.querySelectorAll("button.sort:not(.lazy)").forEach(wireSort);
  });
})();
