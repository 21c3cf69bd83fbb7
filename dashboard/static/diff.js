// The diff page's tables of changed tests, drawn from the build's lazily loaded
// data/diff/<slug>.js (pages/diff.py): per table the first ``limit`` rows that match its
// filter; a column's button sorts every row (not only those drawn); the downloads hold
// every row, made in the browser when followed.  All text goes in through
// textContent: test ids and messages come from anywhere.
(function () {
  "use strict";
  var TC = window.TC, cfg = TC.diffData;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }

  function wire(data, t) {
    var section = document.querySelector('[data-diff-table="' + t.key + '"]');
    if (!section) { return; }
    var id = "d-" + t.key, table = document.getElementById(id), body = table.tBodies[0];
    var input = document.getElementById(id + "-filter"), more = section.querySelector("[data-more-for]");
    var count = section.querySelector('[data-count-for="' + id + '"]');
    var ids = TC.expandIds(t.ids), rows = [], classes = [];
    for (var i = 0, p = 0; i < ids.length; i++, p += 5) {
      var r = t.rows;
      rows.push([ids[i], data.ops[r[p]], data.states[r[p + 1]], data.states[r[p + 2]], data.fallbacks[r[p + 3]],
                 data.messages[r[p + 4]]]);
      classes.push([data.classes[r[p + 1]], data.classes[r[p + 2]]]);
    }
    var order = rows.map(function (_, k) { return k; });
    var texts = rows.map(function (r) { return r.join(" ").toLowerCase(); });

    function draw() {
      var q = input.value.trim().toLowerCase(), shown = 0, total = 0, frag = document.createDocumentFragment();
      order.forEach(function (k) {
        if (q && texts[k].indexOf(q) === -1) { return; }
        total++;
        if (shown >= cfg.limit) { return; }
        shown++;
        var tr = el("tr");
        rows[k].forEach(function (v, j) {
          var td = el("td", v);
          if (j === 2 && classes[k][0]) { td.className = "c-" + classes[k][0]; }
          if (j === 3 && classes[k][1]) { td.className = "c-" + classes[k][1]; }
          tr.appendChild(td);
        });
        frag.appendChild(tr);
      });
      body.textContent = "";
      body.appendChild(frag);
      count.textContent = total === rows.length ? rows.length + " rows" : total + " of " + rows.length + " rows";
      more.hidden = total <= shown;
      more.textContent = "Showing the first " + shown + " of " + total + " rows; the filter and the downloads reach all of them.";
    }

    Array.prototype.forEach.call(table.querySelectorAll("button.sort"), function (button) {
      button.addEventListener("click", function () {
        var col = +button.getAttribute("data-col"), asc = button.getAttribute("aria-sort") !== "ascending";
        table.querySelectorAll("button.sort").forEach(function (b) { b.removeAttribute("aria-sort"); });
        button.setAttribute("aria-sort", asc ? "ascending" : "descending");
        button.setAttribute("data-arrow", asc ? "\u25B2" : "\u25BC");
        order.sort(function (a, b) {
          var x = String(rows[a][col]).toLowerCase(), y = String(rows[b][col]).toLowerCase();
          return (x < y ? -1 : x > y ? 1 : a - b) * (asc ? 1 : -1);
        });
        draw();
      });
    });
    input.addEventListener("input", draw);
    TC.offerDownloads(section.querySelector(".downloads.made"), data.columns, function () {
      return order.map(function (k) { return rows[k]; });
    });
    draw();
  }

  TC.load(cfg.src, cfg.key).then(function (data) {
    data.tables.forEach(function (t) { wire(data, t); });
  }, function (err) {
    document.querySelectorAll("[data-more-for]").forEach(function (p) { p.hidden = false; p.textContent = String(err.message || err); });
  });
})();
