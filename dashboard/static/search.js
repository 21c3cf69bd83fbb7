// Test search and history, on the client: the site ships one compact index of
// every test id by position (data/tests.js) and one string of outcome codes per build
// (data/builds/<slug>.js, one character per position).
// Both load lazily, only when the user searches; a test's history also loads the
// failure data (data/failures/<slug>/, the chunk holding the test) of the builds
// where it failed, for its messages and repro commands.  The query box takes the
// query language of static/query.js (outcome:fail op:add msg:"not close" ...): a
// test's attributes load with it (data/attrs.js) only when a query names one, a
// build's failure messages only for a msg: term.  Only the builds within
// --full-builds have search data (cfg.builds).  All text is inserted with
// textContent, never innerHTML: test ids come from anywhere.
(function () {
  "use strict";
  var TC = window.TC, cfg = TC.searchConfig;
  var root = document.body.getAttribute("data-root") || "";
  var form = document.getElementById("search-form");
  var status = document.getElementById("search-status");
  var results = document.getElementById("results");
  var index = null;

  function loadIndex() {
    return TC.testIndex(root).then(function (data) { index = data; return data.ids; });
  }
  function loadBuild(slug) { return TC.buildCodes(root, slug); }
  function codeAt(build, i) { return build.codes.charAt(i) || "."; }
  function findFailure(slug, pos) {
    // the test's message and repro command in a build; a site from before they were written has none
    return TC.findFailure(root, slug, pos).then(null, function () { return null; });
  }
  function label(code) { return (cfg.codeLabels[code] || ["", "not in this build"]); }

  function setHash() {
    var p = new URLSearchParams();
    ["q", "build", "state"].forEach(function (k) { if (form.elements[k].value) { p.set(k, form.elements[k].value); } });
    if (TC.currentTest) { p.set("test", TC.currentTest); }
    history.replaceState(null, "", p.toString() ? "#" + p.toString() : location.pathname);
  }

  // data/attrs.js: each test's suite, file, op, variant and dtype (loaded for a query naming one)
  var columns = {};
  function loadColumns(names) {
    if (!names.length) { return Promise.resolve(columns); }
    return TC.load(root + "data/attrs.js", "attrs").then(function (data) {
      names.forEach(function (f) {
        if (!columns[f]) {
          var col = data.columns[f];
          columns[f] = { values: col.values, numbers: TC.query.decodeColumn(col, data.digits, data.n) };
        }
      });
      return columns;
    });
  }
  // test id -> lowercased message in a build's failure data (loaded for a msg: term)
  var messages = {};
  function loadMessages(slug) {
    if (messages[slug]) { return Promise.resolve(messages[slug]); }
    return TC.failureIndex(root, slug).then(function (index) {
      return TC.allFailures(root, slug, index);
    }).then(function (all) {
      var byId = Object.create(null);
      all.forEach(function (f) { byId[f.test] = (f.message || "").toLowerCase(); });
      messages[slug] = byId;
      return byId;
    });
  }
  var lowered = null;
  function buildName(slug) {
    for (var i = 0; i < cfg.builds.length; i++) { if (cfg.builds[i].slug === slug) { return cfg.builds[i].name; } }
    return slug;
  }
  function showError(text) {
    status.textContent = text;
    status.className = "count query-error";
    results.textContent = "";
  }

  var seq = 0, lastKey = null;
  function search() {
    var q = form.elements.q.value.trim();
    var slug = form.elements.build.value, state = form.elements.state.value;
    // "change" also fires when the box loses focus; the same query must not
    // rebuild the results under the user's cursor.
    var key = JSON.stringify([q, slug, state]);
    if (key === lastKey) { return; }
    lastKey = key;
    var mine = ++seq;
    setHash();
    status.className = "count";
    if (!q && !(slug && state)) { status.textContent = "Type to search."; results.textContent = ""; return; }
    var tree, info, env = { builds: cfg.builds, outcomes: cfg.outcomes };
    try {
      tree = TC.query.parse(q);
      info = TC.query.analyse(tree, env);
    } catch (err) {
      if (err instanceof TC.query.QueryError) { showError("Query not understood: " + err.message); return; }
      throw err;
    }
    // the build whose outcomes and messages the query looks at: a build: term, the list,
    // or (a query about outcomes or messages with neither) the newest build
    var scope = info.build || slug || ((info.outcome || info.msg || state) && cfg.builds.length ? cfg.builds[cfg.builds.length - 1].slug : "");
    status.textContent = "Loading the test index\u2026";
    Promise.all([loadIndex(), scope ? loadBuild(scope) : null, loadColumns(Object.keys(info.attrs)),
                 info.msg && scope ? loadMessages(scope) : {}]).then(function (got) {
      if (mine !== seq) { return; }
      var all = got[0], build = got[1], hits = [], total = 0;
      if (!lowered) { lowered = all.map(function (t) { return t === null ? "" : t.toLowerCase(); }); }
      var test = TC.query.compile(info.tree, env, { ids: all, lower: lowered, codes: build ? build.codes : "",
                                               columns: got[2], messages: got[3] });
      // in id order, over the tests some build of the site has
      for (var o = 0; o < index.order.length; o++) {
        var i = index.order[o];
        if (build) {
          var c = codeAt(build, i);
          if (c === "." || (state && c !== state)) { continue; }
        }
        if (!test(i)) { continue; }
        total++;
        if (hits.length < cfg.limit) { hits.push(i); }
      }
      results.textContent = "";
      hits.forEach(function (i) {
        var li = document.createElement("li"), b = document.createElement("button");
        b.type = "button";
        b.textContent = all[i];
        b.title = "History of this test in every build, with its messages";
        b.addEventListener("click", function () { showHistory(all[i], i); });
        li.appendChild(b);
        if (build) {
          var code = codeAt(build, i), s = document.createElement("span");
          s.className = "swatch c-" + label(code)[0];
          s.title = label(code)[1];
          s.textContent = code;
          li.appendChild(document.createTextNode(" "));
          li.appendChild(s);
        }
        results.appendChild(li);
      });
      status.textContent = total + " matching tests" + (scope ? " in build " + buildName(scope) : "") +
        (total > hits.length ? " (showing the first " + hits.length + ")" : "") + ".";
    }, function (err) { if (mine === seq) { status.textContent = String(err.message || err); } });
  }

  function missingOp(data, pos) { return TC.missingOps(data)[pos] || ""; }

  function showHistory(testId, pos) {
    TC.currentTest = testId;
    setHash();
    var section = document.getElementById("history");
    document.getElementById("history-test").textContent = testId;
    var body = document.querySelector("#history-table tbody");
    body.textContent = "";
    section.hidden = false;
    status.textContent = "Loading " + cfg.builds.length + " builds\u2026";
    Promise.all(cfg.builds.map(function (b) { return loadBuild(b.slug); })).then(function (all) {
      // the failure data only of the builds where this test failed or the backend skipped it
      return Promise.all(all.map(function (data, k) {
        return cfg.failureCodes.indexOf(codeAt(data, pos)) === -1 ? null : findFailure(cfg.builds[k].slug, pos);
      })).then(function (failures) { return [all, failures]; });
    }).then(function (got) {
      var all = got[0], records = [];
      all.forEach(function (data, k) {
        var b = cfg.builds[k], code = codeAt(data, pos), found = got[1][k];
        var rec = { build: b.name, created: b.created, outcome: label(code)[1], missing_op: code === "M" ? missingOp(data, pos) : "",
                    message: found ? found.f.message : "", repro: found ? TC.repro(found.index, found.f) : "" };
        records.push(rec);
        var tr = document.createElement("tr");
        var a = document.createElement("a");
        a.href = root + "builds/" + encodeURIComponent(b.slug) + "/index.html";
        a.textContent = b.name;
        var cells = [a, rec.created, rec.outcome, rec.missing_op, rec.message, rec.repro];
        cells.forEach(function (v, j) {
          var td = document.createElement("td");
          if (j === 0) { td.appendChild(v); } else if (j >= 4 && v) {
            var pre = document.createElement("pre");
            pre.className = j === 4 ? "message" : "repro";
            pre.textContent = v;
            td.appendChild(pre);
          } else { td.textContent = v; }
          if (j === 2 && code !== ".") { td.className = "c-" + label(code)[0]; }
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      status.textContent = "History of one test across " + all.length + " builds.";
      var json = JSON.stringify({ test_id: testId, history: records }, null, 1);
      var csv = "build,created,outcome,missing_op,message,repro\n" + records.map(function (r) {
        return [r.build, r.created, r.outcome, r.missing_op, r.message, r.repro].map(function (v) { return '"' + String(v).replace(/"/g, '""') + '"'; }).join(",");
      }).join("\n") + "\n";
      document.getElementById("history-json").href = "data:application/json;charset=utf-8," + encodeURIComponent(json);
      document.getElementById("history-csv").href = "data:text/csv;charset=utf-8," + encodeURIComponent(csv);
      section.scrollIntoView();
    }, function (err) { status.textContent = String(err.message || err); });
  }

  form.addEventListener("input", search);
  form.addEventListener("change", search);
  // Permalinks: #q=...&build=...&state=...&test=<exact id>
  var p = new URLSearchParams(location.hash.slice(1));
  ["q", "build", "state"].forEach(function (k) { if (p.get(k)) { form.elements[k].value = p.get(k); } });
  if (p.get("q") || (p.get("build") && p.get("state"))) { search(); }
  if (p.get("test")) {
    loadIndex().then(function (all) {
      var i = all.indexOf(p.get("test"));
      if (i === -1) { status.textContent = "No test with id " + p.get("test") + "."; } else { showHistory(all[i], i); }
    });
  }
})();
