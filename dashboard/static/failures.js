// The build page's failure list: every failed, errored, crashed, timed-out and
// backend-skipped test with its message and repro command, from the build's
// lazily loaded data/failures/<slug>/ (its index, then every chunk; the test ids
// come from data/tests.js and the build's data/builds file, see static/site.js).  Filters (text, outcome, cluster) are
// kept in the URL's hash (#q=..&label=..&cluster=K, the clusters page links
// there).  All text goes in through textContent: messages come from anywhere.
(function () {
  "use strict";
  var TC = window.TC, cfg = TC.failuresConfig;
  var form = document.getElementById("failures-form");
  var status = document.getElementById("failures-status");
  var body = document.querySelector("#failures-table tbody");
  var index = null, all = [], fields = ["q", "label", "cluster"];

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }
  function option(select, value, text) {
    var o = el("option", text);
    o.value = value;
    select.appendChild(o);
  }

  function show() {
    var q = form.elements.q.value.trim().toLowerCase(), label = form.elements.label.value;
    var cluster = form.elements.cluster.value, params = new URLSearchParams();
    fields.forEach(function (k) { if (form.elements[k].value) { params.set(k, form.elements[k].value); } });
    history.replaceState(null, "", params.toString() ? "#" + params.toString() : location.pathname);
    var total = 0;
    body.textContent = "";
    all.forEach(function (f) {
      if (label && f.label !== label) { return; }
      if (cluster !== "" && String(f.cluster) !== cluster) { return; }
      if (q && f.test.toLowerCase().indexOf(q) === -1 && f.message.toLowerCase().indexOf(q) === -1) { return; }
      total++;
      if (total > cfg.limit) { return; }
      var tr = el("tr"), a = el("a", f.test), td = el("td");
      a.href = cfg.search + "#test=" + encodeURIComponent(f.test);
      td.appendChild(a);
      tr.appendChild(td);
      tr.appendChild(el("td", f.label));
      td = el("td");
      td.appendChild(el("pre", f.message, "message"));
      tr.appendChild(td);
      td = el("td");
      var pre = el("pre", undefined, "repro");
      pre.appendChild(el("code", TC.repro(index, f)));
      td.appendChild(pre);
      tr.appendChild(td);
      body.appendChild(tr);
    });
    status.textContent = total + " of " + all.length + " tests" +
      (total > cfg.limit ? " (showing the first " + cfg.limit + ")" : "") + ".";
  }

  TC.failureIndex(cfg.root, cfg.slug).then(function (got) {
    index = got;
    return TC.allFailures(cfg.root, cfg.slug, index);
  }).then(function (got) {
    // the data goes by position; the list reads in test id order
    all = got.slice().sort(function (a, b) { return a.test < b.test ? -1 : a.test > b.test ? 1 : 0; });
    index.labels.slice().sort().forEach(function (l) { option(form.elements.label, l, l); });
    index.clusters.forEach(function (sig, k) { option(form.elements.cluster, String(k), sig); });
    var initial = new URLSearchParams(location.hash.slice(1));
    fields.forEach(function (k) { if (initial.get(k)) { form.elements[k].value = initial.get(k); } });
    form.addEventListener("input", show);
    form.addEventListener("change", show);
    show();
  }, function (err) { status.textContent = String(err.message || err); });
})();
