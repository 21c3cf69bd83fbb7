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

  // A build's failure data (data/failures/<slug>/, see dashboard/failures.py): an
  // index (labels, ops, repro commands, clusters, each chunk's first test id) and
  // chunks of tests by id.  A row becomes {test, label, message, op, cluster, r};
  // TC.repro(index, f) joins its repro command from its parts (0: id, 1: op).
  function failuresAt(root, slug) { return root + "data/failures/" + encodeURIComponent(slug) + "/"; }
  TC.failureIndex = function (root, slug) { return TC.load(failuresAt(root, slug) + "index.js", "failures:" + slug); };
  TC.failureChunk = function (root, slug, index, k) {
    return TC.load(failuresAt(root, slug) + k + ".js", "failures:" + slug + ":" + k).then(function (chunk) {
      if (chunk.decoded) { return chunk.decoded; }
      var list = [], byId = {}, s = index.stride, rows = chunk.rows, at = 0;
      chunk.groups.forEach(function (g) {
        g[1].forEach(function (tail) {
          var f = { test: g[0] + tail, label: index.labels[rows[at]],
                    message: rows[at + 1] >= 0 ? index.messages[rows[at + 1]] : chunk.messages[~rows[at + 1]],
                    r: rows[at + 2], op: index.ops[rows[at + 3]], cluster: rows[at + 4] };
          list.push(f);
          byId[f.test] = f;
          at += s;
        });
      });
      chunk.decoded = { list: list, byId: byId };
      return chunk.decoded;
    });
  };
  // every failure of a build, in test id order
  TC.allFailures = function (root, slug, index) {
    return Promise.all(index.first.map(function (_, k) { return TC.failureChunk(root, slug, index, k); }))
      .then(function (chunks) { return [].concat.apply([], chunks.map(function (c) { return c.list; })); });
  };
  // one test's failure in a build (null: none), from the one chunk that should hold it
  TC.findFailure = function (root, slug, testId) {
    return TC.failureIndex(root, slug).then(function (index) {
      var lo = 0, hi = index.first.length - 1;
      if (hi < 0) { return null; }
      while (lo < hi) {       // the last chunk whose first test id is <= testId
        var mid = (lo + hi + 1) >> 1;
        if (index.first[mid] <= testId) { lo = mid; } else { hi = mid - 1; }
      }
      return TC.failureChunk(root, slug, index, lo).then(function (c) {
        if (c.byId[testId]) { return { index: index, f: c.byId[testId] }; }
        // the ids' order differs from the browser's for some characters: look everywhere
        return TC.allFailures(root, slug, index).then(function (all) {
          var f = all.filter(function (x) { return x.test === testId; })[0];
          return f ? { index: index, f: f } : null;
        });
      });
    });
  };
  TC.repro = function (index, f) {
    return index.repros[f.r].map(function (p) { return p === 0 ? f.test : p === 1 ? f.op : p; }).join("");
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
    document.querySelectorAll("button.sort").forEach(wireSort);
  });
})();
